//! `crosstalk hook pre-tool-use`: the edit guard. Before Claude Code edits
//! or writes a file, it asks the relay whether another person's claim
//! covers the file (in the same repository: its root, and the repository
//! its `origin` remote names), and refuses the edit naming the holder when
//! one does. The relay away, or anything unknown, lets the edit go on (and
//! says so on stderr): the guard never blocks work it cannot check.

use super::relay::Relay;
use super::{Input, QUICK};
use crate::wire::work::{ClaimView, Claims, normalize_repo};
use serde_json::{Value, json};
use std::path::{Component, Path, PathBuf};

/// Claude Code's tools that change a file, and the field naming it.
const EDITS: &[(&str, &str)] = &[
    ("Edit", "file_path"),
    ("MultiEdit", "file_path"),
    ("Write", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// Claude Code's decision for the step, or none (it goes on).
pub(super) async fn guard(relay: &Relay, input: &Input) -> Option<Value> {
    let field = EDITS
        .iter()
        .find(|(tool, _)| *tool == input.tool_name)
        .map(|(_, field)| *field)?;
    let file = input.tool_input[field].as_str()?;
    let file = absolute(Path::new(&input.cwd), Path::new(file));
    let root = repository_root(&file)?;
    let path = file.strip_prefix(&root).ok()?.to_str()?.to_owned();
    let repo = origin(&root).await.unwrap_or_default();
    let claims = match tokio::time::timeout(QUICK, relay.claims_on(&repo, &path)).await {
        Ok(Ok(claims)) => claims,
        Ok(Err(error)) => {
            eprintln!(
                "crosstalk hook: cannot ask the relay about claims ({error}); the edit goes on unchecked"
            );
            return None;
        }
        Err(_) => {
            eprintln!(
                "crosstalk hook: the relay did not answer about claims in time; the edit goes on unchecked"
            );
            return None;
        }
    };
    let theirs = claims.claims.first()?;
    Some(json!({ "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason(&path, theirs),
    } }))
}

/// Why the edit is refused, for the model: whose claim, on what, until
/// when, their note, and what to do instead.
fn reason(path: &str, claim: &ClaimView) -> String {
    let note = claim
        .note
        .as_deref()
        .map(|n| format!(" Their note: \"{n}\"."))
        .unwrap_or_default();
    format!(
        "{path} is claimed by {holder} on the crosstalk relay (claim {id}: {what}, until \
         {until}).{note} Do not edit it now: work on something else, or ask {holder} with \
         send_message.",
        holder = claim.holder,
        id = claim.id,
        what = claim.what,
        until = claim.expires_at,
    )
}

/// `file` made absolute against `cwd`, with `.` and `..` taken out as
/// written (the file may not exist yet).
fn absolute(cwd: &Path, file: &Path) -> PathBuf {
    let joined = cwd.join(file);
    let mut clean = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    clean
}

/// The root of the git repository holding `file`: the nearest directory
/// above it with a `.git` (a directory, or a worktree's file).
fn repository_root(file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The repository's `origin` remote as claims name it (`normalize_repo`:
/// without the user name or token a URL may carry).
async fn origin(root: &Path) -> Option<String> {
    let output = tokio::time::timeout(
        QUICK,
        tokio::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["config", "--get", "remote.origin.url"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    let url = String::from_utf8(output.stdout).ok()?;
    Some(normalize_repo(&url)).filter(|repo| !repo.is_empty())
}

impl Relay {
    /// Other people's live claims covering `path` in `repo`.
    async fn claims_on(&self, repo: &str, path: &str) -> Result<Claims, String> {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("repo", repo)
            .append_pair("path", path)
            .append_pair("others", "true")
            .finish();
        let response = self
            .http
            .get(format!("{}/api/claims?{query}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("status {status}"));
        }
        response.json().await.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_made_absolute_as_written() {
        assert_eq!(
            absolute(Path::new("/work/app"), Path::new("src/../README.md")),
            PathBuf::from("/work/app/README.md")
        );
        assert_eq!(
            absolute(Path::new("/work/app"), Path::new("/etc/./hosts")),
            PathBuf::from("/etc/hosts")
        );
    }
}
