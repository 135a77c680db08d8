//! The ACL file (`--aclfile`, `aclfile` in the config file): one user a line, as ACL LIST
//! shows them (`user alice on #<sha256> ~app:* +@read`). It is read whole at start and by
//! ACL LOAD, and every line must be valid or nothing changes; ACL SAVE writes every user
//! to a new file beside it and renames that over it, so a crash leaves the old file or the
//! new one. Blank lines and lines starting with `#` are skipped.

use crate::core::acl::{edit, merge_selectors, Acl, Commands, User};
use std::path::Path;

/// The users `text` declares, or every line's error (`path:line: why`).
pub fn parse(
    text: &str,
    path: &Path,
    cmds: &dyn Commands,
    pubsub_all: bool,
) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    let mut errors = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut err = |m: String| errors.push(format!("{}:{}: {m}", path.display(), n + 1));
        let words: Vec<&[u8]> = line.split_ascii_whitespace().map(str::as_bytes).collect();
        if words[0] != b"user" || words.len() < 2 {
            err("should start with user keyword followed by the username".into());
            continue;
        }
        let name = words[1];
        if users.iter().any(|u| u.name == name) {
            err(format!(
                "Duplicate user '{}' found",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        let rules = match merge_selectors(&words[2..]) {
            Ok(r) => r,
            Err(at) => {
                err(format!(
                    "Unmatched parenthesis in acl selector starting at '{}'.",
                    String::from_utf8_lossy(&at)
                ));
                continue;
            }
        };
        match edit(User::new(name, pubsub_all), &rules, cmds, pubsub_all) {
            Ok(u) => users.push(u),
            Err((op, e)) => err(format!(
                "Error in applying operation '{}': {e}",
                String::from_utf8_lossy(&op)
            )),
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        Err(errors.join(" "))
    }
}

/// Reads `path` and replaces every user with those it declares (all or nothing).
pub fn load(acl: &Acl, path: &Path, cmds: &dyn Commands) -> Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("Error loading ACLs, opening file '{}': {e}", path.display()))?;
    let users = parse(&text, path, cmds, acl.pubsub_all())?;
    acl.replace_all(users);
    Ok(())
}

/// Writes every user to `path` (a new file, synced, renamed over the old one).
pub fn save(acl: &Acl, path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut text = String::new();
    for u in acl.all() {
        text.push_str(&format!(
            "user {} {}\n",
            String::from_utf8_lossy(&u.name),
            u.describe()
        ));
    }
    let tmp = path.with_extension("tmp-save");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
