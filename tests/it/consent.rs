//! Consent by capability (issue 29, point 6): the admin who installs a
//! skill consents to what it declares; an upgrade asking for more waits
//! for a review that shows the difference, one asking for the same or
//! fewer serves at once.

use crate::common::{TestServer, install_options, send, tempdir, upload, zip_of};
use serde_json::{Value, json};

/// `probe` at `version`, declaring `permissions` (and the network when
/// `network`).
fn probe(version: &str, permissions: &str, network: bool) -> Vec<u8> {
    let md = format!(
        "---\nname: probe\nversion: {version}\ndescription: Probes.\nread_only: true\nnetwork: {network}\n\
         permissions: [{permissions}]\n---\n\n### probe\n\nProbes.\n\n#### Command\n\n```\necho {version}\n```\n"
    );
    zip_of(&[("SKILL.md", &md, false)])
}

async fn install(server: &TestServer, zip: Vec<u8>) -> String {
    let (status, headers, body) = upload(server, zip, "?trust=user").await;
    assert_eq!(status, 201, "{body}");
    headers["x-skill-status"].to_str().unwrap().to_owned()
}

async fn serving(server: &TestServer) -> Value {
    server.get_json("/skills/probe").await["version"].clone()
}

#[tokio::test]
async fn an_upgrade_asking_for_more_waits_for_consent_and_one_asking_less_does_not() {
    let (user, installed) = (tempdir().unwrap(), tempdir().unwrap());
    let server = TestServer::builder(install_options(user.path(), installed.path()))
        .start()
        .await;
    // The first install is the admin's consent: it serves.
    assert_eq!(
        install(&server, probe("1.0.0", "file:read", false)).await,
        "ready"
    );
    // The same set, reordered with a duplicate: no review.
    assert_eq!(
        install(&server, probe("1.1.0", "file:read, file:read", false)).await,
        "ready"
    );
    assert_eq!(serving(&server).await, "1.1.0");

    // More: a new permission and the network.
    assert_eq!(
        install(&server, probe("2.0.0", "file:read, shell:exec", true)).await,
        "pending_review"
    );
    assert_eq!(serving(&server).await, "1.1.0", "the consented version serves on");
    let reviews = server.get_json("/reviews").await;
    let review = &reviews["reviews"][0];
    assert_eq!(review["version"], "2.0.0", "{reviews}");
    let finding = review["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "permissions_added")
        .unwrap_or_else(|| panic!("{review}"));
    let message = finding["message"].as_str().unwrap();
    assert!(
        message.contains("network, shell:exec") && message.contains("1.1.0"),
        "{message}"
    );
    assert_eq!(
        (finding["path"].as_str(), finding["line"].as_u64()),
        (Some("SKILL.md"), Some(7))
    );
    assert_eq!(finding["excerpt"], "permissions: [file:read, shell:exec]");

    // The admin consents: it serves.
    let (status, decided) = send(
        &server,
        reqwest::Method::POST,
        "/skills/probe@2.0.0/review",
        Some(json!({"decision": "approve", "note": "shell is fine"})),
    )
    .await;
    assert_eq!((status, &decided["status"]), (200, &json!("ready")), "{decided}");
    assert_eq!(serving(&server).await, "2.0.0");

    // Fewer than 2.0.0 consented to: no review.
    assert_eq!(
        install(&server, probe("2.1.0", "file:read", false)).await,
        "ready"
    );
    assert_eq!(serving(&server).await, "2.1.0");
    // Compared with what serves now (2.1.0): shell:exec again asks.
    assert_eq!(
        install(&server, probe("2.2.0", "file:read, shell:exec", false)).await,
        "pending_review"
    );
    let reviews = server.get_json("/reviews").await;
    let message = reviews["reviews"][0]["findings"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.starts_with("asks for shell:exec beyond what 2.1.0"),
        "{reviews}"
    );
}
