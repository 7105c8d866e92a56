//! A static file server on loopback: a registry or a source to fetch from.

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A real static file server on loopback over `dir`.
pub struct Static {
    pub child: Child,
    pub url: String,
}

impl Static {
    pub fn start(dir: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", &port.to_string()])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self::waiting(child, port)
    }

    /// `child`, once it takes connections on `port`.
    pub fn waiting(mut child: Child, port: u16) -> Self {
        let url = format!("http://127.0.0.1:{port}");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Self { child, url };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the HTTP server did not start");
    }
}

impl Drop for Static {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
