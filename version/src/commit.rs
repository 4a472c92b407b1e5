//! Which commit a source tree is, asked of `git`: run by the build script, and by the tests.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

/// What a build that cannot tell its commit says instead.
pub const UNKNOWN: &str = "unknown commit";

/// The environment variable that names the commit when `.git` is not there to ask.
pub const OVERRIDE_VAR: &str = "ADK_BUILD_COMMIT";

/// A git work tree's commit and the files whose change can change it.
#[derive(Debug)]
pub struct Described {
    /// The short hash of HEAD, followed by "+dirty" when tracked files differ from it.
    pub text: String,
    /// HEAD, the branch it names, the packed refs and the index: the files git changes on a
    /// commit, a checkout, `git add` or a `git status` that sees an edited file.
    pub watch: Vec<PathBuf>,
}

/// The commit of the git work tree whose top level is `root`. None when git is not installed,
/// `root` is not the top of a work tree (a source tarball, even one unpacked inside another
/// repository), or the repository has no commit yet.
pub fn describe(root: &Path) -> Option<Described> {
    let top = git(root, &["rev-parse", "--show-toplevel"])?;
    if fs::canonicalize(top).ok()? != fs::canonicalize(root).ok()? {
        return None;
    }
    let hash = git(root, &["rev-parse", "--short", "HEAD"])?;
    // Untracked files are not part of what was committed or built, as with `git describe --dirty`.
    let changes = git(root, &["status", "--porcelain", "--untracked-files=no"])?;
    let text = if changes.is_empty() {
        hash
    } else {
        format!("{hash}+dirty")
    };
    let mut names = vec![
        "HEAD".to_owned(),
        "index".to_owned(),
        "packed-refs".to_owned(),
    ];
    // The branch HEAD names, if any ("HEAD" itself when detached).
    if let Some(branch) = git(root, &["rev-parse", "--symbolic-full-name", "HEAD"]) {
        if branch.starts_with("refs/") {
            names.push(branch);
        }
    }
    let mut watch = Vec::new();
    for name in names {
        // Relative to `root` in a plain checkout, absolute in a linked work tree.
        let path = root.join(git(root, &["rev-parse", "--git-path", &name])?);
        // Cargo reruns a build script on every build while a path it watches is missing.
        if path.exists() {
            watch.push(path);
        }
    }
    Some(Described { text, watch })
}

/// The trimmed standard output of a successful `git` command run in `dir`.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        // `-C dir` decides the repository, not a repository named by the caller's environment
        // (as in a git hook).
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        // `git status` would otherwise rewrite the index it refreshes, and the next build would
        // see the index change and run this again.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(String::from_utf8(output.stdout).ok()?.trim().to_owned())
}
