//! The layers, end to end: flags over the file over the defaults, and
//! what a refused value says.

use super::*;
use crate::auth::TokenList;
use crate::skill::Trust;

/// The key and the whole message of why `args` do not resolve.
fn refused(args: &ServeArgs) -> (Option<&'static str>, String) {
    let err = Config::resolve(args).unwrap_err();
    (err.key(), err.to_string())
}

/// How a message names the file of `args` as where a value was set.
fn in_file(args: &ServeArgs) -> String {
    format!(" (in {})", args.local.config.as_ref().unwrap().display())
}

#[test]
fn flags_beat_file_beats_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skilld.toml");
    std::fs::write(
        &file,
        "bind = \"127.0.0.1:9000\"\nskills = [\"untrusted=/a\"]\nmax_timeout_secs = 60\n",
    )
    .unwrap();
    let mut args = ServeArgs {
        local: LocalArgs {
            config: Some(file),
            ..LocalArgs::default()
        },
        ..ServeArgs::default()
    };
    let c = Config::resolve(&args).unwrap();
    assert_eq!(c.bind.port(), 9000);
    assert_eq!(c.max_timeout_secs, 60);
    assert_eq!(c.roots[0].trust, Trust::Untrusted);
    args.bind = Some("127.0.0.1:0".into());
    args.local.skills = vec!["/b".into()];
    let c = Config::resolve(&args).unwrap();
    assert_eq!(c.bind.port(), 0);
    assert_eq!(c.roots[0].path, PathBuf::from("/b"));
    assert_eq!(c.roots[0].trust, Trust::User);
}

#[test]
fn public_bind_needs_insecure() {
    let mut args = ServeArgs {
        bind: Some("0.0.0.0:8080".into()),
        ..ServeArgs::default()
    };
    assert!(Config::resolve(&args).is_err());
    args.insecure = Some(true);
    assert!(Config::resolve(&args).is_ok());
}

fn with_file(text: &str) -> (tempfile::TempDir, ServeArgs) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skilld.toml");
    std::fs::write(&file, text).unwrap();
    let args = ServeArgs {
        local: LocalArgs {
            config: Some(file),
            ..LocalArgs::default()
        },
        ..ServeArgs::default()
    };
    (dir, args)
}

#[test]
fn the_file_sets_the_image_allowlist_and_entrypoint_defaults() {
    let (_dir, args) = with_file(
        "data_dir = \"/srv/skilld\"\nimage_allowlist = [\"python:3.12-slim\", \"ghcr.io/acme/*\"]\n\
         entrypoint_timeout_secs = 90\nentrypoint_memory_bytes = 536870912\nentrypoint_cpu = 1.5\n",
    );
    let c = Config::resolve(&args).unwrap();
    assert_eq!(c.rules.image_allowlist, ["python:3.12-slim", "ghcr.io/acme/*"]);
    assert!(c.rules.allows_image("ghcr.io/acme/tool:2") && !c.rules.allows_image("node:20-slim"));
    let d = c.rules.entrypoint;
    assert_eq!(
        (d.timeout_secs, d.memory_bytes, d.cpu),
        (90, Some(512 << 20), Some(1.5))
    );
    assert_eq!(c.rules.deps_dir, Some(PathBuf::from("/srv/skilld/deps")));
    // Seed 003's, without the file.
    let c = Config::resolve(&ServeArgs::default()).unwrap();
    assert_eq!(
        c.rules.image_allowlist,
        ["python:3.12-slim", "node:20-slim", "bash:5"]
    );
    let d = c.rules.entrypoint;
    assert_eq!(
        (d.timeout_secs, d.memory_bytes, d.cpu),
        (120, Some(256 << 20), Some(0.5))
    );
    for bad in [
        "entrypoint_cpu = 0.0\n",
        "entrypoint_timeout_secs = 0\n",
        "image_allowlist = [\"\"]\n",
    ] {
        let (_dir, args) = with_file(bad);
        assert!(Config::resolve(&args).is_err(), "{bad}");
    }
}

#[test]
fn tokens_from_file_and_env_merge() {
    use crate::auth::Role;
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"approver-secret"));
    let (_dir, mut args) = with_file(&format!(
        "[[tokens]]\nname = \"agent\"\nrole = \"invoke\"\nsecret = \"agent-secret\"\n\
         [[tokens]]\nname = \"boss\"\nrole = \"approve\"\nsecret_sha256 = \"{sha}\"\n"
    ));
    args.tokens = Some(TokenList("ops:admin:ops-secret".into()));
    let c = Config::resolve(&args).unwrap();
    let found = |s: &str| c.auth.find(s).map(|t| (t.name().to_owned(), t.role()));
    assert_eq!(found("agent-secret"), Some(("agent".into(), Role::Invoke)));
    assert_eq!(found("approver-secret"), Some(("boss".into(), Role::Approve)));
    assert_eq!(found("ops-secret"), Some(("ops".into(), Role::Admin)));
    assert_eq!(found(&sha), None);
    // The secrets never reach the debug print of the configuration.
    let printed = format!("{c:?}");
    assert!(
        printed.contains("agent") && !printed.contains("agent-secret"),
        "{printed}"
    );
    assert!(
        !printed.contains("ops-secret") && !printed.contains(&sha),
        "{printed}"
    );

    args.tokens = Some(TokenList("agent:read:other".into()));
    assert_eq!(
        refused(&args),
        (
            Some("tokens"),
            format!(
                "token 'agent' is defined twice (config file and SKILLD_TOKENS){}",
                in_file(&args)
            )
        )
    );
}

#[test]
fn token_config_errors_name_the_token() {
    let cases = [
        (
            "name = \"a\"\nrole = \"root\"\nsecret = \"x\"",
            "token 'a' (config file): unknown role 'root'",
        ),
        (
            "name = \"a\"\nrole = \"read\"\nsecret = \"\"",
            "token 'a' (config file): the secret is empty",
        ),
        (
            "name = \"a\"\nrole = \"read\"\nsecret_sha256 = \"zz\"",
            "token 'a' (config file): secret_sha256 must be 64",
        ),
        (
            "name = \"a\"\nrole = \"read\"",
            "token 'a' (config file): give its secret",
        ),
    ];
    for (table, expected) in cases {
        let (_dir, args) = with_file(&format!("[[tokens]]\n{table}\n"));
        let (key, err) = refused(&args);
        assert_eq!(key, Some("tokens"), "{table}");
        assert!(err.contains(expected), "{table}: {err}");
        assert!(err.ends_with(&in_file(&args)), "{table}: {err}");
    }
    let (_dir, args) = with_file("[[tokens]]\nname = \"a\"\nrole = \"read\"\nsecert = \"x\"\n");
    let err = Config::resolve(&args).unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("secert"), "{err}");
    // SKILLD_TOKENS is no key of the file: the message names it alone.
    let args = ServeArgs {
        tokens: Some(TokenList("a:read:hunter2,hunter2".into())),
        ..ServeArgs::default()
    };
    assert_eq!(
        refused(&args),
        (
            Some("SKILLD_TOKENS"),
            "SKILLD_TOKENS entry 2 is not name:role:secret".to_owned()
        )
    );
}

#[test]
fn tokens_allow_a_public_bind() {
    let args = ServeArgs {
        bind: Some("0.0.0.0:8080".into()),
        tokens: Some(TokenList("a:read:s".into())),
        ..ServeArgs::default()
    };
    assert!(!Config::resolve(&args).unwrap().auth.is_open());
    let args = ServeArgs {
        bind: Some("0.0.0.0:8080".into()),
        tokens: Some(TokenList(" , ".into())),
        ..ServeArgs::default()
    };
    let err = Config::resolve(&args).unwrap_err();
    assert!(
        matches!(err, ConfigError::Unprotected { bind } if bind.port() == 8080),
        "{err:?}"
    );
    assert!(err.to_string().contains("without tokens"), "{err}");
}

#[test]
fn oauth_issuers_allow_a_public_bind() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skilld.toml");
    std::fs::write(
        &file,
        "[oauth]\nclock_skew_secs = 5\n[[oauth.issuers]]\nissuer = \"https://login.example.com\"\n",
    )
    .unwrap();
    let args = ServeArgs {
        local: LocalArgs {
            config: Some(file),
            ..LocalArgs::default()
        },
        bind: Some("0.0.0.0:8080".into()),
        ..ServeArgs::default()
    };
    let config = Config::resolve(&args).unwrap();
    let oauth = config.oauth.unwrap();
    assert_eq!(oauth.issuers[0].name, "login.example.com");
    assert_eq!(oauth.clock_skew, std::time::Duration::from_secs(5));
    let flagged = ServeArgs {
        bind: Some("0.0.0.0:8080".into()),
        oauth_issuers: vec!["http://login.example.com".into()],
        ..ServeArgs::default()
    };
    let (key, err) = refused(&flagged);
    assert_eq!(key, Some("oauth.issuers"));
    assert!(
        err.contains("https") && err.ends_with(" (from --oauth-issuer or SKILLD_OAUTH_ISSUERS)"),
        "{err}"
    );
    // Issuers given by flag replace the file's, with the defaults.
    let args = ServeArgs {
        oauth_issuers: vec!["https://flag.example".into()],
        ..args
    };
    let issuers = Config::resolve(&args).unwrap().oauth.unwrap().issuers;
    assert_eq!(issuers.len(), 1);
    assert_eq!(issuers[0].issuer, "https://flag.example");
    assert_eq!(issuers[0].name, "flag.example");
}

#[test]
fn unknown_file_keys_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("skilld.toml");
    std::fs::write(&file, "bnid = \"x\"\n").unwrap();
    let args = ServeArgs {
        local: LocalArgs {
            config: Some(file),
            ..LocalArgs::default()
        },
        ..ServeArgs::default()
    };
    let err = Config::resolve(&args).unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("bnid"), "{err}");
}

#[test]
fn connection_and_share_limits_are_read_and_checked() {
    let (_dir, args) = with_file(
        "max_connections = 50\nheader_timeout_secs = 3\nmax_event_streams = 8\n\
         max_mcp_sessions = 20\nmax_mcp_sessions_per_caller = 5\n",
    );
    let c = Config::resolve(&args).unwrap();
    assert_eq!(c.limits.max_connections, 50);
    assert_eq!(c.limits.header_timeout, std::time::Duration::from_secs(3));
    assert_eq!(c.limits.max_mcp_sessions_per_caller, 5);
    // The default share, above a smaller whole, is the whole.
    assert_eq!(c.run.max_streams_per_caller, 8);
    let (_dir, args) = with_file("max_event_streams = 8\nmax_event_streams_per_caller = 9\n");
    assert_eq!(
        refused(&args),
        (
            Some("max_event_streams_per_caller"),
            format!(
                "max_event_streams_per_caller (9) is more than max_event_streams (8){}",
                in_file(&args)
            )
        )
    );
}

#[test]
fn passwords_are_redacted() {
    assert_eq!(redact_url("postgres://u:pw@h/db"), "postgres://u:***@h/db");
    assert_eq!(redact_url("sqlite:///x.db"), "sqlite:///x.db");
}

#[test]
fn a_refused_value_says_which_layer_set_it() {
    // The file's value, named with the file.
    let (_dir, mut args) = with_file("[retention]\nmax_age = \"5x\"\nbatch_size = 0\n");
    let (key, err) = refused(&args);
    assert_eq!(key, Some("retention.max_age"));
    assert!(err.contains("'5x' is not an age"), "{err}");
    assert!(err.ends_with(&in_file(&args)), "{err}");
    // A flag over it: the flag (and its variable) are named, not the file.
    args.retention_max_age = Some("6x".into());
    let (key, err) = refused(&args);
    assert_eq!(key, Some("retention.max_age"));
    assert_eq!(
        err,
        "retention max_age: '6x' is not an age such as 90d, 12h, 30m or 45s \
         (from --retention-max-age or SKILLD_RETENTION_MAX_AGE)"
    );
    // With the age fixed, the file's batch size is next.
    args.retention_max_age = Some("off".into());
    let (key, err) = refused(&args);
    assert_eq!(key, Some("retention.batch_size"));
    assert!(err.contains("must be 1 to 10000, not 0"), "{err}");
    // Without a file, a flag's value still names its flag.
    let args = ServeArgs {
        bind: Some("localhost".into()),
        ..ServeArgs::default()
    };
    assert_eq!(
        refused(&args),
        (
            Some("bind"),
            "--bind 'localhost' is not an address such as 127.0.0.1:8080 (from --bind or SKILLD_BIND)"
                .to_owned()
        )
    );
}

#[test]
fn a_missing_or_broken_file_is_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let args = ServeArgs {
        local: LocalArgs {
            config: Some(dir.path().join("absent.toml")),
            ..LocalArgs::default()
        },
        ..ServeArgs::default()
    };
    let err = Config::resolve(&args).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
    assert!(err.to_string().starts_with("cannot read config "), "{err}");
    assert_eq!(err.key(), None);
    let (_dir, args) = with_file("max_connections = \"many\"\n");
    let err = Config::resolve(&args).unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("max_connections"), "{err}");
}

#[test]
fn notify_targets_need_names_of_their_own() {
    let (_dir, args) = with_file(
        "[[notify]]\nname = \"ops\"\nurl = \"https://a.example/h\"\n\
         [[notify]]\nname = \"ops\"\nurl = \"https://b.example/h\"\n",
    );
    assert_eq!(
        refused(&args),
        (
            Some("notify"),
            format!("two [[notify]] entries are named 'ops'{}", in_file(&args))
        )
    );
}
