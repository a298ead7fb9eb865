//! The input history of `keel chat`, kept in `$KEEL_HOME/history/chat.jsonl`: one JSON string
//! per line (so a multi-line message stays one entry), oldest first, the last [`KEEP`] read
//! back. A history that cannot be read or written costs the history only, never the chat.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Entries read back at start.
pub const KEEP: usize = 1000;

/// The history file under `keel_home`.
pub fn path(keel_home: &Path) -> PathBuf {
    keel_home.join("history").join("chat.jsonl")
}

/// The last [`KEEP`] entries of `file` (none when it is missing or unreadable; lines that are
/// not JSON strings are skipped).
pub fn load(file: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let all: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
        .collect();
    let skip = all.len().saturating_sub(KEEP);
    all.into_iter().skip(skip).collect()
}

/// Appends `entry` to `file`, creating its directory (private to the user).
///
/// # Errors
/// The file system's.
pub fn append(file: &Path, entry: &str) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options.open(file)?;
    let line = serde_json::to_string(entry).map_err(std::io::Error::other)?;
    writeln!(f, "{line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_multi_line_ones_included() {
        let dir = std::env::temp_dir().join(format!("keel-tui-history-{}", std::process::id()));
        let file = path(&dir);
        append(&file, "one").unwrap();
        append(&file, "two\nlines").unwrap();
        std::fs::write(
            &file,
            format!("{}not json\n", std::fs::read_to_string(&file).unwrap()),
        )
        .unwrap();
        assert_eq!(load(&file), ["one", "two\nlines"]);
        assert!(load(&dir.join("missing")).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
