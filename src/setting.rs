//! A config value refused: what the module owning a section of the
//! configuration answers when it reads a value it cannot take. It names
//! the key as the config file spells it, so the config module, which
//! alone knows the layers, can say where that value was set (a flag, its
//! environment variable, or the file).

/// A value refused for the setting `key`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct SettingError {
    /// The key as the config file spells it, dotted inside a section
    /// (`max_timeout_secs`, `retention.max_age`); a setting the file
    /// cannot hold goes by its environment variable (`SKILLD_TOKENS`).
    pub key: &'static str,
    /// Why, in a sentence that names the setting as a person reads it.
    pub why: String,
}

impl SettingError {
    pub fn new(key: &'static str, why: impl Into<String>) -> Self {
        Self { key, why: why.into() }
    }
}

/// `value` of `key`, where 0 would mean nothing at all could happen.
pub fn at_least_one(key: &'static str, value: u64) -> Result<u64, SettingError> {
    if value == 0 {
        return Err(SettingError::new(key, format!("{key} must be at least 1")));
    }
    Ok(value)
}
