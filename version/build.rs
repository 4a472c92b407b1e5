//! Records the git commit the workspace is built from in `ADK_VERSION_COMMIT`, for
//! [`adk_version::COMMIT`].
//!
//! Cargo runs this again only when git's view of the tree can have changed (HEAD, the branch it
//! names, the packed refs, the index: a commit, checkout, `git add` or `git status`), so an
//! ordinary incremental build does not rebuild the binaries that show the commit. Without git
//! or outside a git checkout (a source tarball), the commit is "unknown commit"; a build that
//! knows its commit anyway (a container build, whose context leaves `.git` out) passes it in
//! `ADK_BUILD_COMMIT`.

#[path = "src/commit.rs"]
mod commit;

use std::path::Path;

fn main() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/commit.rs");
    println!("cargo:rerun-if-env-changed={}", commit::OVERRIDE_VAR);
    let given = std::env::var(commit::OVERRIDE_VAR).unwrap_or_default();
    let text = if !given.trim().is_empty() {
        given.trim().to_owned()
    } else {
        // The workspace root is this crate's parent directory.
        let root = crate_dir.parent().unwrap_or(crate_dir);
        match commit::describe(root) {
            Some(found) => {
                for path in &found.watch {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
                found.text
            }
            None => {
                // In a checkout, a git command that failed once (a lock held by a concurrent git)
                // must not pin "unknown" until build.rs changes: the next commit or checkout
                // runs this again. A tarball has no .git, and nothing to watch.
                for name in ["HEAD", "index"] {
                    let path = root.join(".git").join(name);
                    if path.exists() {
                        println!("cargo:rerun-if-changed={}", path.display());
                    }
                }
                commit::UNKNOWN.to_owned()
            }
        }
    };
    println!("cargo:rustc-env=ADK_VERSION_COMMIT={text}");
}
