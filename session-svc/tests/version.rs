//! `session-svc --version` names the binary, its crate version and the commit it was built from.

use std::process::Command;

#[test]
fn version_names_the_crate_version_and_the_commit() {
    let output = Command::new(env!("CARGO_BIN_EXE_session-svc"))
        .arg("--version")
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{output:?}");
    let expected = format!(
        "session-svc {} ({})\n",
        env!("CARGO_PKG_VERSION"),
        adk_version::COMMIT
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), expected);
}
