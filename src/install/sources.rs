//! Where `skilld install` takes a skill from besides a zip or another
//! skilld: a directory, packed as `skilld package` packs it, or a git
//! repository (`URL[#REF][//SUBDIR]`), cloned with the system's `git`.
//!
//! A clone runs none of the repository's code: git is run with no system
//! or user config (so no filter, fsmonitor or credential helper of
//! theirs), no template (so no hook is installed), `core.hooksPath` set
//! to nothing, the `ext` transport refused, and the URL after `--`. What
//! the clone holds is then only read, by the same packer and the same
//! installer as any upload.

use super::archive::write_archive;
use super::client::ClientError;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The longest a clone and its checkout may take.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// The schemes a git source may use: `ext::` runs a command, and scp-like
/// `host:path` is left out so that nothing reads as an option or a path.
const GIT_SCHEMES: [&str; 5] = ["https://", "http://", "git://", "ssh://", "file://"];

/// Packs the skill in `dir` into an unnamed temporary zip file.
pub fn pack_dir(dir: &Path) -> Result<std::fs::File, ClientError> {
    if !(dir.join("SKILL.md").is_file() || dir.join("SKILL.yaml").is_file()) {
        return Err(ClientError::Usage(format!(
            "{} holds no SKILL.md or SKILL.yaml",
            dir.display()
        )));
    }
    let file = tempfile::tempfile()?;
    let mut file = write_archive(dir, file)
        .map_err(|e| ClientError::Usage(format!("cannot pack {}: {e}", dir.display())))?;
    std::io::Seek::rewind(&mut file)?;
    Ok(file)
}

/// A git source: `URL[#REF][//SUBDIR]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSource {
    pub url: String,
    /// A branch, tag or commit; the default branch when `None`.
    pub reference: Option<String>,
    /// The skill's directory in the repository; its root when `None`.
    pub subdir: Option<PathBuf>,
}

impl GitSource {
    pub fn parse(spec: &str) -> Result<Self, ClientError> {
        let usage = |why: &str| ClientError::Usage(format!("git source '{spec}': {why}"));
        let Some(scheme) = GIT_SCHEMES.iter().find(|s| spec.starts_with(**s)) else {
            return Err(usage(&format!(
                "give an address starting with {}",
                GIT_SCHEMES.join(", ")
            )));
        };
        let rest = &spec[scheme.len()..];
        let (rest, subdir) = match rest.split_once("//") {
            Some((rest, subdir)) => (
                rest,
                Some(
                    relative(subdir)
                        .ok_or_else(|| usage("SUBDIR must be a relative path inside the repository"))?,
                ),
            ),
            None => (rest, None),
        };
        let (address, reference) = match rest.split_once('#') {
            Some((address, reference)) => (address, Some(reference)),
            None => (rest, None),
        };
        if let Some(r) = reference
            && (r.is_empty() || r.starts_with('-') || !r.chars().all(|c| c.is_ascii_graphic()))
        {
            return Err(usage("REF must be a branch, tag or commit name"));
        }
        if address.is_empty() {
            return Err(usage("the address names no repository"));
        }
        Ok(Self {
            url: format!("{scheme}{address}"),
            reference: reference.map(str::to_owned),
            subdir,
        })
    }

    /// Clones into `into` (an empty directory) and returns the skill's
    /// directory there.
    pub async fn fetch(&self, into: &Path) -> Result<PathBuf, ClientError> {
        let checkout = into.join("repo");
        let mut clone = vec!["clone", "--quiet", "--no-checkout", "--template=", "--"];
        clone.push(&self.url);
        let target = checkout.to_string_lossy().into_owned();
        clone.push(&target);
        self.git(into, &clone).await?;
        let reference = self.reference.as_deref().unwrap_or("HEAD");
        self.git(&checkout, &["checkout", "--quiet", "--detach", reference, "--"])
            .await?;
        let dir = match &self.subdir {
            Some(sub) => checkout.join(sub),
            None => checkout.clone(),
        };
        // A SUBDIR that is a link out of the clone reads nothing outside.
        let real = dir.canonicalize().map_err(|_| {
            ClientError::Usage(format!("{} has no directory {}", self.url, self.subdir_text()))
        })?;
        if !real.starts_with(checkout.canonicalize()?) || !real.is_dir() {
            return Err(ClientError::Usage(format!(
                "{} has no directory {} inside it",
                self.url,
                self.subdir_text()
            )));
        }
        Ok(real)
    }

    fn subdir_text(&self) -> String {
        self.subdir
            .as_ref()
            .map_or_else(|| "/".to_owned(), |s| s.display().to_string())
    }

    /// Runs `git ARGS` in `cwd` with nobody's config and no hooks, within
    /// [`GIT_TIMEOUT`]; its stderr is the error when it fails.
    async fn git(&self, cwd: &Path, args: &[&str]) -> Result<(), ClientError> {
        let mut command = tokio::process::Command::new("git");
        command
            .current_dir(cwd)
            .args(["-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never"])
            .args(["-c", "core.fsmonitor=false", "-c", "protocol.file.allow=always"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let unreachable = |why: String| ClientError::Unreachable {
            url: self.url.clone(),
            why,
        };
        let child = command
            .spawn()
            .map_err(|e| unreachable(format!("cannot run git: {e}")))?;
        let output = tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| unreachable(format!("git {} took over {} s", args[0], GIT_TIMEOUT.as_secs())))?
            .map_err(|e| unreachable(e.to_string()))?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let why = stderr.trim().chars().take(500).collect::<String>();
        Err(match args[0] {
            "checkout" => ClientError::Usage(format!(
                "{} has no ref {}: {why}",
                self.url,
                self.reference.as_deref().unwrap_or("HEAD")
            )),
            _ => unreachable(why),
        })
    }
}

/// `path` when it is relative and stays inside (no `..`, no root).
fn relative(path: &str) -> Option<PathBuf> {
    let p = Path::new(path.trim_end_matches('/'));
    let inside = p
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    (inside && !path.is_empty()).then(|| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_sources_parse_into_address_ref_and_subdir() {
        let s = GitSource::parse("https://host/org/repo.git#v1.2//skills/k8s").unwrap();
        assert_eq!(s.url, "https://host/org/repo.git");
        assert_eq!(s.reference.as_deref(), Some("v1.2"));
        assert_eq!(s.subdir, Some(PathBuf::from("skills/k8s")));
        let s = GitSource::parse("file:///srv/repo//deep/skill/").unwrap();
        assert_eq!(
            (s.url.as_str(), s.reference, s.subdir),
            ("file:///srv/repo", None, Some(PathBuf::from("deep/skill")))
        );
        let s = GitSource::parse("git://127.0.0.1:9418/repo.git#main").unwrap();
        assert_eq!(
            (s.url.as_str(), s.reference.as_deref(), s.subdir),
            ("git://127.0.0.1:9418/repo.git", Some("main"), None)
        );
        for bad in [
            "ext::sh -c touch% /tmp/pwned",
            "--upload-pack=touch /tmp/x",
            "host:repo.git",
            "https://host/repo#--orphan",
            "https://host/repo#",
            "https://host/repo//../../etc",
            "https://host/repo///etc",
            "https://",
        ] {
            assert!(GitSource::parse(bad).is_err(), "{bad}");
        }
    }
}
