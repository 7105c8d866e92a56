//! Retention of the run log (`docs/design.md` §5): a background task of
//! `skilld serve` that deletes final runs past their age or beyond the
//! newest N, in small batches with a pause between them, so that calls
//! running meanwhile wait for one short transaction at most. What it
//! deletes can first be appended, one JSON line per run, to an export file.

use crate::setting::{SettingError, at_least_one};
use crate::store::{PruneExport, Pruning, Run, RunPosition, StoreError};
use chrono::Utc;
use serde::Deserialize;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What is kept, and how the pruning goes.
#[derive(Debug, Clone, PartialEq)]
pub struct RetentionSettings {
    /// Final runs created longer ago than this are pruned; `None`: kept
    /// whatever their age.
    pub max_age: Option<Duration>,
    /// Final runs older than the newest this many are pruned; `None`: no
    /// limit by count.
    pub max_runs: Option<u64>,
    /// The JSON-lines file pruned runs are appended to before they go.
    pub export: Option<PathBuf>,
    /// How often a pass looks for runs to prune.
    pub interval: Duration,
    /// Runs deleted per transaction.
    pub batch: u32,
    /// The pause between two batches of one pass.
    pub pause: Duration,
}

impl Default for RetentionSettings {
    /// Keep 90 days, no count limit, no export; a pass every hour, 200
    /// runs per transaction, 100 ms between transactions.
    fn default() -> Self {
        Self {
            max_age: Some(DEFAULT_MAX_AGE),
            max_runs: None,
            export: None,
            interval: Duration::from_secs(3600),
            // SQLite's calls queue behind a batch's delete: keep it short.
            batch: 200,
            pause: Duration::from_millis(100),
        }
    }
}

/// The default `max_age`: 90 days.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(90 * 24 * 3600);
/// The largest batch: a transaction of more holds the writer too long.
pub const MAX_BATCH: u32 = 10_000;

impl RetentionSettings {
    /// Whether anything is ever pruned.
    pub fn enabled(&self) -> bool {
        self.max_age.is_some() || self.max_runs.is_some()
    }
}

/// `[retention]` of the config file, with the flags of its keys already
/// over it (`docs/api.md`, "Retention").
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// How long final runs stay: `90d` (default), `12h`, `30m`, `45s`, or
    /// `off` to keep them whatever their age.
    pub max_age: Option<String>,
    /// How many of the newest runs are kept at least: a number, or
    /// `"off"` (default).
    pub max_runs: Option<toml::Value>,
    /// A file pruned runs are appended to, one JSON line each, before
    /// they are deleted.
    pub export: Option<PathBuf>,
    /// How often a pass looks for runs to prune (default 3600 s).
    pub interval_secs: Option<u64>,
    /// Runs deleted per transaction (default 200).
    pub batch_size: Option<u32>,
    /// The pause between two transactions of a pass (default 100 ms).
    pub pause_ms: Option<u64>,
}

impl RetentionConfig {
    /// The settings, over the defaults. Every bad value is refused at
    /// start-up rather than found out by the first pass.
    pub fn resolve(self) -> Result<RetentionSettings, SettingError> {
        let defaults = RetentionSettings::default();
        let max_age = match self.max_age {
            None => defaults.max_age,
            Some(off) if off.trim() == "off" => None,
            Some(age) => Some(
                parse_age(&age)
                    .map_err(|e| SettingError::new("retention.max_age", format!("retention max_age: {e}")))?,
            ),
        };
        let max_runs = match &self.max_runs {
            Some(toml::Value::Integer(n)) => parse_max_runs(&n.to_string())?,
            Some(toml::Value::String(text)) => parse_max_runs(text)?,
            Some(other) => {
                return Err(SettingError::new(
                    "retention.max_runs",
                    format!("retention max_runs: {other} is not a number or \"off\""),
                ));
            }
            None => None,
        };
        let batch = self.batch_size.unwrap_or(defaults.batch);
        if !(1..=MAX_BATCH).contains(&batch) {
            return Err(SettingError::new(
                "retention.batch_size",
                format!("retention batch_size must be 1 to {MAX_BATCH}, not {batch}"),
            ));
        }
        let interval = match self.interval_secs {
            Some(secs) => Duration::from_secs(at_least_one("retention.interval_secs", secs)?),
            None => defaults.interval,
        };
        if let Some(path) = &self.export {
            check_export(path)?;
        }
        Ok(RetentionSettings {
            max_age,
            max_runs,
            export: self.export,
            interval,
            batch,
            pause: self.pause_ms.map_or(defaults.pause, Duration::from_millis),
        })
    }
}

/// `max_runs`: a count of at least 1, or `off`.
fn parse_max_runs(text: &str) -> Result<Option<u64>, SettingError> {
    match text.trim() {
        "off" => Ok(None),
        n => match n.parse::<u64>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => Err(SettingError::new(
                "retention.max_runs",
                format!(
                    "retention max_runs '{text}' must be a count of at least 1, or off (no limit by count)"
                ),
            )),
        },
    }
}

/// The export file must be one the server can append to: in an existing
/// directory, and not a directory itself.
fn check_export(path: &Path) -> Result<(), SettingError> {
    let refused = |why: String| Err(SettingError::new("retention.export", why));
    if !path.parent().is_some_and(Path::is_dir) {
        return refused(format!(
            "retention export {}: its directory does not exist",
            path.display()
        ));
    }
    if path.is_dir() {
        return refused(format!("retention export {} is a directory", path.display()));
    }
    Ok(())
}

/// The running task; stops when dropped.
#[derive(Debug)]
pub struct Retention(tokio::task::JoinHandle<()>);

impl Drop for Retention {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts pruning `store` by `settings`; `None` when nothing is to be
/// pruned. The first pass starts at once.
pub fn spawn(store: Arc<dyn Pruning>, settings: RetentionSettings) -> Option<Retention> {
    if !settings.enabled() {
        return None;
    }
    Some(Retention(tokio::spawn(async move {
        let mut tick = tokio::time::interval(settings.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match prune(store.as_ref(), &settings).await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "pruned old runs from the run log"),
                // Tried again at the next pass; nothing was lost.
                Err(e) => tracing::warn!(error = %e, "cannot prune the run log"),
            }
        }
    })))
}

/// One pass: batches until no run is due. Returns how many went.
pub async fn prune(store: &dyn Pruning, settings: &RetentionSettings) -> Result<u64, StoreError> {
    let Some(before) = cutoff(store, settings).await? else {
        return Ok(0);
    };
    let export = settings.export.clone().map(ExportFile::new);
    let export = export.as_ref().map(|e| e as &dyn PruneExport);
    let mut total = 0;
    loop {
        let pruned = store.prune_runs(before, settings.batch, export).await?;
        total += pruned;
        if pruned < u64::from(settings.batch) {
            return Ok(total);
        }
        tokio::time::sleep(settings.pause).await;
    }
}

/// The position before which final runs are due: the later of the age's
/// and the count's, fixed for the pass so that it ends.
async fn cutoff(
    store: &dyn Pruning,
    settings: &RetentionSettings,
) -> Result<Option<RunPosition>, StoreError> {
    let by_age = settings
        .max_age
        .and_then(|age| chrono::Duration::from_std(age).ok())
        .and_then(|age| Utc::now().checked_sub_signed(age))
        .map(RunPosition::created_before);
    let by_count = match settings.max_runs {
        Some(n) => store.nth_newest_run(n).await?,
        None => None,
    };
    Ok(by_age.max(by_count))
}

/// The export file: each run as the API renders it, one JSON object per
/// line, appended and synced before the store deletes it. A crash after
/// the sync and before the delete commits exports that batch again at the
/// next pass: a line may be duplicated, never lost.
#[derive(Debug, Clone)]
pub struct ExportFile {
    path: PathBuf,
}

impl ExportFile {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

#[async_trait::async_trait]
impl PruneExport for ExportFile {
    async fn export(&self, runs: &[Run]) -> std::io::Result<()> {
        let mut lines = Vec::new();
        for run in runs {
            serde_json::to_writer(&mut lines, run)?;
            lines.push(b'\n');
        }
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || append_synced(&path, &lines))
            .await
            .map_err(std::io::Error::other)?
    }
}

/// Appends `lines` to `path` and syncs them (and, for a new file, its
/// directory entry). A line a crash cut short is ended first, so that it
/// stands alone and the next line is whole.
fn append_synced(path: &Path, lines: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let created = !path.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .mode(0o600)
        .open(path)?;
    if ends_mid_line(&mut file)? {
        file.write_all(b"\n")?;
    }
    file.write_all(lines)?;
    file.sync_data()?;
    if created && let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Whether the file's last byte is not a newline (a cut-short write).
fn ends_mid_line(file: &mut std::fs::File) -> std::io::Result<bool> {
    if file.metadata()?.len() == 0 {
        return Ok(false);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// A duration as the config writes it: a whole number and a unit, `s`,
/// `m`, `h` or `d` (`90d`, `12h`); at least one second.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let bad = || format!("'{text}' is not an age such as 90d, 12h, 30m or 45s");
    let text = text.trim();
    let split = text.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = text.split_at_checked(split).ok_or_else(bad)?;
    let number: u64 = number.parse().map_err(|_| bad())?;
    let unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    match number.checked_mul(unit) {
        Some(0) | None => Err(bad()),
        Some(secs) => Ok(Duration::from_secs(secs)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_their_unit() {
        assert_eq!(parse_age("90d").unwrap(), DEFAULT_MAX_AGE);
        assert_eq!(parse_age("12h").unwrap(), Duration::from_secs(43_200));
        assert_eq!(parse_age("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_age(" 45s ").unwrap(), Duration::from_secs(45));
        for bad in [
            "",
            "d",
            "90",
            "0d",
            "-1d",
            "1.5d",
            "90 days",
            "1w",
            "99999999999999999999d",
        ] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cut_short_line_is_ended_before_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pruned.jsonl");
        std::fs::write(&path, b"{\"id\":").unwrap();
        append_synced(&path, b"{\"a\":1}\n").unwrap();
        append_synced(&path, b"{\"b\":2}\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"id\":\n{\"a\":1}\n{\"b\":2}\n"
        );
    }
}
