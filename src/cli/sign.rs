//! `skilld keygen` and `skilld package --sign`: minisign keys and
//! signatures of packages, which `skilld install` and `POST /skills`
//! check against a server's trusted keys (`install::signature`).

use crate::install::signature::SigningKey;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where an encrypted secret key's password comes from: never a prompt,
/// so signing works the same in a terminal and in CI.
const PASSWORD_VARIABLE: &str = "SKILLD_SIGN_PASSWORD";

#[derive(Debug, clap::Args)]
pub struct KeygenArgs {
    /// Writes PREFIX.key (the secret key, unencrypted, mode 0600) and
    /// PREFIX.pub (the public key, as `minisign -G` writes it).
    #[arg(long = "out", value_name = "PREFIX")]
    out: PathBuf,
}

/// `PREFIX` with `.ext` added (not replacing an extension it has).
fn with_suffix(path: &Path, ext: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(ext);
    PathBuf::from(name)
}

/// `skilld keygen`: exit 1 when either file exists (nothing is
/// overwritten), 2 when they cannot be written.
pub fn keygen(args: &KeygenArgs) -> ExitCode {
    let (secret, public) = (with_suffix(&args.out, ".key"), with_suffix(&args.out, ".pub"));
    if let Some(there) = [&secret, &public].into_iter().find(|p| p.exists()) {
        eprintln!("skilld: {} exists; nothing was written", there.display());
        return ExitCode::from(1);
    }
    let key = match SigningKey::generate() {
        Ok(key) => key,
        Err(e) => {
            eprintln!("skilld: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = write_pair(&key, &secret, &public) {
        eprintln!("skilld: {e}");
        return ExitCode::from(2);
    }
    println!("{}", key.public_base64());
    eprintln!(
        "key {}: keep {} secret; servers trust {} with --trusted-key",
        key.id(),
        secret.display(),
        public.display()
    );
    ExitCode::SUCCESS
}

/// Writes the secret key (0600, created anew) and the public key; on a
/// failure neither is left.
fn write_pair(key: &SigningKey, secret: &Path, public: &Path) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let text = key.secret_file().map_err(|e| e.to_string())?;
    let fail = |path: &Path, e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(secret)
        .map_err(|e| fail(secret, e))?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| fail(secret, e))
        .and_then(|()| write_new(public, key.public_file().as_bytes()).map_err(|e| fail(public, e)));
    if written.is_err() {
        let _ = std::fs::remove_file(secret);
    }
    written
}

/// Creates `path` with `bytes`, never replacing a file there.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// The key `skilld package --sign KEYFILE` signs with, read before
/// anything is written.
pub fn signing_key(path: &Path) -> Result<SigningKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let password = std::env::var(PASSWORD_VARIABLE).ok();
    SigningKey::read(&text, password).map_err(|e| format!("{}: {e}", path.display()))
}

/// Signs the archive at `archive`, writing `ARCHIVE.minisig` beside it
/// (through a temporary file, so a failure leaves none): its path.
pub fn sign_archive(key: &SigningKey, archive: &Path) -> anyhow::Result<PathBuf> {
    let out = with_suffix(archive, ".minisig");
    let name = archive
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let minisig = key.sign(std::fs::File::open(archive)?, &name)?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut staged = tempfile::NamedTempFile::new_in(parent)?;
    staged.write_all(minisig.as_bytes())?;
    staged.as_file().sync_all()?;
    // A signature is for others to read, as the package is.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(staged.path(), std::fs::Permissions::from_mode(0o644))?;
    staged.persist(&out)?;
    Ok(out)
}
