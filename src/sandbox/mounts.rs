//! The mount namespace confined runs join: the host's `/tmp`, `/run`,
//! `/var/tmp` and `/dev/shm` covered by empty file systems, and `/proc`
//! mounted again with `hidepid=invisible`.
//!
//! Why: Landlock governs opening files, not connecting to a unix socket
//! by its path, and not reading another process's `/proc/<pid>/cmdline`.
//! The host keeps its sockets (a database's, an agent's, a terminal
//! multiplexer's, the container engine's) in those places; out of sight,
//! they cannot be reached. With `hidepid=invisible` a run sees only the
//! processes it could trace: its own, since Landlock keeps each run from
//! tracing anything outside its domain, and the server is not dumpable.
//!
//! The namespace is made once, by a thread of its own that stays in it,
//! and runs only join it (`setns` in the child, a few microseconds),
//! where a namespace per run would copy the host's mount table and tear
//! it down again each time. What a run must reach under a covered place
//! (a skill, the workspace, the scratch root, when they lie in `/tmp`) is
//! bound back into the namespace the first time a run needs it, through a
//! descriptor of the covered directory kept from before it was covered.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// The most paths remembered as lying outside the covered places.
const MAX_REMEMBERED: usize = 1024;

/// The places covered in the namespace, when they are directories here.
const COVERED: [&str; 5] = ["/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm"];

/// A shared namespace, and what binds paths into it.
#[derive(Debug)]
pub(super) struct Mounts {
    ns: Arc<OwnedFd>,
    /// The user namespace that owns `ns`, for a server that is not root;
    /// a run joins it first.
    user: Option<Arc<OwnedFd>>,
    /// The covered places, by real path.
    covered: Vec<PathBuf>,
    binder: Binder,
    /// What has been bound back, with the device and inode it had then:
    /// a place removed and made again on the host is bound again.
    shown: Mutex<HashMap<PathBuf, (u64, u64)>>,
    /// Paths as runs name them that lie outside every covered place.
    outside: Mutex<std::collections::HashSet<PathBuf>>,
    /// Whether `/proc` hides other processes in it.
    pub(super) hides_processes: bool,
    /// The namespace's `/proc`, for the run's Landlock rule: another
    /// instance than the host's, so the host's rule would not reach it.
    /// `None` where it is the host's.
    proc: Option<OwnedFd>,
}

/// How paths are bound into the namespace.
#[derive(Debug)]
enum Binder {
    /// A root server's thread that lives in the namespace.
    Thread(Mutex<mpsc::Sender<Bind>>),
    /// A server that is not root: a child cloned into the namespaces for
    /// each binding, with a descriptor of each covered place's original.
    Clone(Vec<(PathBuf, OwnedFd)>),
}

/// One request to the binder: show `path` (a real path under a covered
/// place) in the namespace as it is on the host.
struct Bind {
    path: PathBuf,
    done: mpsc::SyncSender<io::Result<()>>,
}

impl Mounts {
    /// Makes the namespace: in the host's user namespace for a root
    /// server, else in one of its own.
    pub(super) fn make() -> io::Result<Self> {
        if nix::unistd::geteuid().is_root() {
            Self::make_as_root()
        } else {
            Self::make_in_user_namespace()
        }
    }

    fn make_in_user_namespace() -> io::Result<Self> {
        let places: Vec<&Path> = COVERED
            .iter()
            .map(Path::new)
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
            .collect();
        let made = super::userns::make(&places)?;
        let under = places.iter().map(|p| p.to_path_buf()).zip(made.under).collect();
        let mounts = Self {
            ns: Arc::new(made.mnt),
            user: Some(Arc::new(made.user)),
            covered: places.iter().map(|p| p.to_path_buf()).collect(),
            binder: Binder::Clone(under),
            shown: Mutex::default(),
            outside: Mutex::default(),
            hides_processes: false,
            proc: None,
        };
        if let Ok(resolver) = Path::new("/etc/resolv.conf").canonicalize()
            && let Err(err) = mounts.reveal([resolver.as_path()])
        {
            tracing::info!(%err, "runs will not see the host's resolver configuration");
        }
        Ok(mounts)
    }

    fn make_as_root() -> io::Result<Self> {
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let (bind_tx, bind_rx) = mpsc::channel::<Bind>();
        std::thread::Builder::new()
            .name("skilld-mounts".to_owned())
            .spawn(move || match Namespace::enter() {
                Ok((ns, made)) => {
                    let _ = ready_tx.send(Ok(made));
                    ns.serve(&bind_rx);
                }
                Err(err) => {
                    let _ = ready_tx.send(Err(err));
                }
            })?;
        let made = ready_rx
            .recv()
            .map_err(|_| io::Error::other("the mount namespace's thread ended"))??;
        Ok(Self {
            ns: Arc::new(made.fd),
            user: None,
            covered: made.covered,
            binder: Binder::Thread(Mutex::new(bind_tx)),
            shown: Mutex::default(),
            outside: Mutex::default(),
            hides_processes: made.hides_processes,
            proc: Some(made.proc),
        })
    }

    /// `/proc` as runs in the namespace see it, when it is not the host's.
    pub(super) fn proc(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.proc.as_ref().map(AsFd::as_fd)
    }

    /// The namespace, for the child to join.
    pub(super) fn namespace(&self) -> Arc<OwnedFd> {
        self.ns.clone()
    }

    /// The user namespace to join before it, if any.
    pub(super) fn user_namespace(&self) -> Option<Arc<OwnedFd>> {
        self.user.clone()
    }

    /// Makes each of `paths` (and what lies beneath it) visible in the
    /// namespace as on the host, where it lies under a covered place.
    pub(super) fn reveal<'a>(&self, paths: impl IntoIterator<Item = &'a Path>) -> io::Result<()> {
        for path in paths {
            if self.known_outside(path) {
                continue;
            }
            let Ok(real) = path.canonicalize() else {
                continue;
            };
            if !self.covered.iter().any(|c| real.starts_with(c)) {
                self.remember_outside(path);
                continue;
            }
            let meta = std::fs::metadata(&real)?;
            let id = (meta.dev(), meta.ino());
            if self.is_shown(&real, id) {
                continue;
            }
            self.bind(&real)?;
            self.lock_shown().insert(real, id);
        }
        Ok(())
    }

    /// Whether `path` was found to lie outside every covered place: most
    /// paths do (a skill root, the workspace), and each run names them
    /// again, so the lookup of their real path is done once.
    fn known_outside(&self, path: &Path) -> bool {
        self.outside
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(path)
    }

    fn remember_outside(&self, path: &Path) {
        let mut outside = self
            .outside
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A bound, for servers whose paths keep changing.
        if outside.len() >= MAX_REMEMBERED {
            outside.clear();
        }
        outside.insert(path.to_path_buf());
    }

    fn lock_shown(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (u64, u64)>> {
        self.shown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `real` is already shown: bound itself with the same inode,
    /// or beneath a place bound whole.
    fn is_shown(&self, real: &Path, id: (u64, u64)) -> bool {
        let shown = self.lock_shown();
        if let Some(was) = shown.get(real) {
            return *was == id;
        }
        real.ancestors().skip(1).any(|a| shown.contains_key(a))
    }

    fn bind(&self, real: &Path) -> io::Result<()> {
        match &self.binder {
            Binder::Thread(sender) => Self::bind_by_thread(sender, real),
            Binder::Clone(under) => self.bind_by_clone(under, real),
        }
    }

    fn bind_by_clone(&self, under: &[(PathBuf, OwnedFd)], real: &Path) -> io::Result<()> {
        let (Some(user), Some((place, fd))) = (&self.user, under.iter().find(|(p, _)| real.starts_with(p)))
        else {
            return Ok(());
        };
        let rel = real.strip_prefix(place).map_err(io::Error::other)?;
        let is_dir = std::fs::metadata(real)?.is_dir();
        // The mount point's directories, outermost first, below the place.
        let last = if is_dir { Some(real) } else { real.parent() };
        let mut dirs: Vec<&Path> = last
            .into_iter()
            .flat_map(Path::ancestors)
            .take_while(|a| a.starts_with(place) && *a != place.as_path())
            .collect();
        dirs.reverse();
        let source = original(fd.as_raw_fd(), rel);
        super::userns::bind(user, &self.ns, &dirs, !is_dir, &source, real)
            .map_err(|e| io::Error::other(format!("cannot show {} to runs: {e}", real.display())))
    }

    fn bind_by_thread(binder: &Mutex<mpsc::Sender<Bind>>, real: &Path) -> io::Result<()> {
        let (done, answer) = mpsc::sync_channel(1);
        let request = Bind {
            path: real.to_path_buf(),
            done,
        };
        binder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(request)
            .map_err(|_| io::Error::other("the mount namespace's thread ended"))?;
        answer
            .recv()
            .map_err(|_| io::Error::other("the mount namespace's thread ended"))?
    }
}

/// What the thread made, for [`Mounts`].
struct Made {
    fd: OwnedFd,
    covered: Vec<PathBuf>,
    hides_processes: bool,
    proc: OwnedFd,
}

/// The thread's side: the covered places' original directories.
struct Namespace {
    under: Vec<(PathBuf, OwnedFd)>,
}

impl Namespace {
    /// Moves this thread into a new mount namespace and covers the places.
    fn enter() -> io::Result<(Self, Made)> {
        use nix::mount::{MsFlags, mount};
        // Only this thread moves: unsharing the namespace gives it its own
        // root and working directory, leaving the server's threads alone.
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(io::Error::from)?;
        // Nothing done here reaches the host; what the host mounts later
        // still shows here.
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_SLAVE,
            None::<&str>,
        )
        .map_err(io::Error::from)?;
        let mut under = Vec::new();
        for place in COVERED.iter().map(Path::new) {
            if let Some(kept) = cover(place)? {
                under.push(kept);
            }
        }
        let hides_processes = remount_proc();
        let ns = Self { under };
        ns.keep_resolver();
        let fd = std::fs::File::open("/proc/thread-self/ns/mnt")?.into();
        let proc = nix::fcntl::open(
            "/proc",
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(io::Error::from)?;
        let covered = ns.under.iter().map(|(p, _)| p.clone()).collect();
        Ok((
            ns,
            Made {
                fd,
                covered,
                hides_processes,
                proc,
            },
        ))
    }

    /// Answers bind requests until the [`Mounts`] is dropped.
    fn serve(self, requests: &mpsc::Receiver<Bind>) {
        while let Ok(Bind { path, done }) = requests.recv() {
            let _ = done.send(self.bind(&path));
        }
    }

    /// Binds the host's `path` over the same path here, making the mount
    /// point in the covering file system first.
    fn bind(&self, path: &Path) -> io::Result<()> {
        use nix::mount::{MntFlags, MsFlags, mount, umount2};
        let Some((place, fd)) = self.under.iter().find(|(p, _)| path.starts_with(p)) else {
            return Ok(());
        };
        let rel = path.strip_prefix(place).map_err(io::Error::other)?;
        let source = original(fd.as_raw_fd(), rel);
        let is_dir = std::fs::metadata(&source)?.is_dir();
        // A stale binding of a place since made again on the host.
        let _ = umount2(path, MntFlags::MNT_DETACH);
        if is_dir {
            std::fs::create_dir_all(path)?;
        } else {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        }
        mount(
            Some(&source),
            path,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| io::Error::other(format!("cannot show {} to runs: {e}", path.display())))
    }

    /// `/etc/resolv.conf` often links into `/run`: a run with the network
    /// resolves names as the host does. The file only, not its directory,
    /// which may hold the resolver's socket.
    fn keep_resolver(&self) {
        let Ok(real) = Path::new("/etc/resolv.conf").canonicalize() else {
            return;
        };
        if let Err(err) = self.bind(&real) {
            tracing::info!(%err, "runs will not see the host's resolver configuration");
        }
    }
}

/// Covers `place` with an empty, read-only-for-others tmpfs, keeping a
/// descriptor of what was there. `None` when it is not a directory here
/// (`/var/run` is a link to `/run` on most systems).
fn cover(place: &Path) -> io::Result<Option<(PathBuf, OwnedFd)>> {
    use nix::fcntl::{OFlag, open};
    use nix::mount::{MsFlags, mount};
    use nix::sys::stat::Mode;
    let Ok(meta) = std::fs::symlink_metadata(place) else {
        return Ok(None);
    };
    if !meta.is_dir() {
        return Ok(None);
    }
    let fd = open(
        place,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    mount(
        Some("tmpfs"),
        place,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=0755,size=1m"),
    )
    .map_err(|e| io::Error::other(format!("cannot cover {}: {e}", place.display())))?;
    Ok(Some((place.to_path_buf(), fd)))
}

/// Mounts a `/proc` of its own that shows a process only to those that
/// could trace it. The option's name form (`invisible`) is what a kernel
/// with per-mount `/proc` options takes (5.8): an older one, whose
/// options would change the host's `/proc` too, refuses it.
fn remount_proc() -> bool {
    use nix::mount::{MsFlags, mount};
    let made = mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("hidepid=invisible"),
    );
    if let Err(err) = &made {
        tracing::info!(%err, "runs see every process in /proc: it cannot be mounted with hidepid here");
    }
    made.is_ok()
}

/// The path of `rel` beneath the covered directory `fd`, through the
/// descriptor's link in `/proc` (the descriptor table is the server's,
/// shared by the thread or child that binds).
fn original(fd: RawFd, rel: &Path) -> PathBuf {
    Path::new(&format!("/proc/self/fd/{fd}")).join(rel)
}
