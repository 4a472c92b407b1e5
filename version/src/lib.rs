//! What every binary of the workspace says for `--version`: its crate version and the git commit
//! it was built from, e.g. `session-svc 0.1.0 (3568244)`, `0.1.0 (3568244+dirty)` when tracked
//! files differed from that commit, `0.1.0 (unknown commit)` when built without git (a source
//! tarball). The build script finds the commit; `src/commit.rs` holds how.

/// The commit the workspace was built from: a short hash, with "+dirty" when tracked files had
/// changes, or "unknown commit".
pub const COMMIT: &str = env!("ADK_VERSION_COMMIT");

/// `"<crate_version> (<commit>)"`, the version text of a binary whose crate is `crate_version`.
pub fn describe(crate_version: &str) -> String {
    format!("{crate_version} ({COMMIT})")
}

/// The version text of the calling crate's binary, for clap's `#[command(version = ...)]`.
#[macro_export]
macro_rules! version {
    () => {
        $crate::describe(env!("CARGO_PKG_VERSION"))
    };
}

#[cfg(test)]
#[path = "commit.rs"]
mod commit;

#[cfg(test)]
mod tests {
    use std::{fs, path::Path, process::Command};

    use super::commit::{describe, OVERRIDE_VAR, UNKNOWN};

    fn git(dir: &Path, args: &[&str]) -> String {
        let output = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=test", "-c", "user.email=test@localhost"])
            .args(args)
            .output()
            .expect("git runs (the tests need it installed)");
        assert!(output.status.success(), "git {args:?}: {output:?}");
        String::from_utf8(output.stdout)
            .expect("utf-8")
            .trim()
            .to_owned()
    }

    /// A repository with one committed file, `tracked`.
    fn repository() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temporary directory");
        git(dir.path(), &["init", "-q"]);
        fs::write(dir.path().join("tracked"), "one").expect("write");
        git(dir.path(), &["add", "tracked"]);
        git(dir.path(), &["commit", "-q", "-m", "first"]);
        dir
    }

    #[test]
    fn the_version_text_is_the_crate_version_and_the_commit() {
        assert_eq!(
            super::describe("1.2.3"),
            format!("1.2.3 ({})", super::COMMIT)
        );
        assert_eq!(
            crate::version!(),
            format!("{} ({})", env!("CARGO_PKG_VERSION"), super::COMMIT)
        );
    }

    #[test]
    fn a_clean_checkout_is_its_short_hash() {
        let repo = repository();
        let found = describe(repo.path()).expect("a checkout is described");
        assert_eq!(
            found.text,
            git(repo.path(), &["rev-parse", "--short", "HEAD"])
        );
        // An untracked file was never built from the commit: still clean.
        fs::write(repo.path().join("untracked"), "x").expect("write");
        assert_eq!(describe(repo.path()).expect("described").text, found.text);
    }

    #[test]
    fn changed_tracked_files_make_it_dirty() {
        let repo = repository();
        let hash = git(repo.path(), &["rev-parse", "--short", "HEAD"]);
        fs::write(repo.path().join("tracked"), "two").expect("write");
        assert_eq!(
            describe(repo.path()).expect("described").text,
            format!("{hash}+dirty")
        );
        git(repo.path(), &["commit", "-q", "-am", "second"]);
        let next = git(repo.path(), &["rev-parse", "--short", "HEAD"]);
        assert_ne!(next, hash);
        assert_eq!(describe(repo.path()).expect("described").text, next);
    }

    #[test]
    fn what_git_changes_on_a_commit_is_watched_and_exists() {
        let repo = repository();
        let watch = describe(repo.path()).expect("described").watch;
        let git_dir = repo.path().join(".git");
        for name in ["HEAD", "index"] {
            assert!(
                watch.contains(&git_dir.join(name)),
                "{name} not in {watch:?}"
            );
        }
        let branch = git(repo.path(), &["rev-parse", "--symbolic-full-name", "HEAD"]);
        assert!(
            watch.contains(&git_dir.join(&branch)),
            "{branch} not in {watch:?}"
        );
        // A missing path would make cargo rerun the build script on every build.
        assert!(watch.iter().all(|p| p.exists()), "{watch:?}");
    }

    #[test]
    fn a_tree_without_git_is_not_described() {
        let tarball = tempfile::tempdir().expect("a temporary directory");
        assert!(describe(tarball.path()).is_none());
        // Unpacked inside another repository: that repository's commit is not this tree's.
        let repo = repository();
        let inner = repo.path().join("adk-services-0.1.0");
        fs::create_dir(&inner).expect("mkdir");
        assert!(describe(&inner).is_none());
        // A repository without a commit yet.
        let empty = tempfile::tempdir().expect("a temporary directory");
        git(empty.path(), &["init", "-q"]);
        assert!(describe(empty.path()).is_none());
    }

    #[test]
    fn this_build_names_the_commit_of_its_checkout() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let given = std::env::var(OVERRIDE_VAR).unwrap_or_default();
        let expected = if !given.trim().is_empty() {
            given.trim().to_owned()
        } else {
            match describe(&root) {
                // The hash; whether the tree is dirty can change between the build and the test.
                Some(found) => found.text.trim_end_matches("+dirty").to_owned(),
                None => UNKNOWN.to_owned(),
            }
        };
        assert_eq!(super::COMMIT.trim_end_matches("+dirty"), expected);
    }
}
