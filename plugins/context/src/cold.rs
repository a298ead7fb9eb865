//! The cold tier's search index (CTX-02, MEM-08): SQLite FTS5 over every sunk original of a
//! session.
//!
//! The bytes themselves live in the session log, which never loses them (`coldcontext_read`
//! reads the original event back by seq); this index only finds them. It is derived, so it is
//! kept in memory and rebuilt from the log the first time a session is searched in a process
//! (after a resume or a fork): a crash can never leave it disagreeing with the log.

use rusqlite::{Connection, params};

/// One sunk original.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColdItem {
    /// The seq of the original event in the log (its cold reference is `cold:<seq>`).
    pub seq: u64,
    /// What it was: `read_file {"path":"a.txt"}`, `assistant text`, ….
    pub what: String,
    /// Its text, as the model saw it before it sank.
    pub content: String,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The original's seq.
    pub seq: u64,
    /// What it was.
    pub what: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The matching part, terms in `[…]`.
    pub snippet: String,
}

/// An index error (SQLite's own words).
#[derive(Debug, thiserror::Error)]
#[error("cold index: {0}")]
pub struct IndexError(#[from] rusqlite::Error);

/// One session's index.
pub struct ColdIndex {
    db: Connection,
}

impl std::fmt::Debug for ColdIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdIndex").finish_non_exhaustive()
    }
}

impl ColdIndex {
    /// An empty in-memory index.
    ///
    /// # Errors
    /// When SQLite cannot open it (FTS5 missing from the build).
    pub fn new() -> Result<Self, IndexError> {
        let db = Connection::open_in_memory()?;
        db.execute_batch(
            "CREATE VIRTUAL TABLE cold USING fts5(what, content, seq UNINDEXED, bytes UNINDEXED, tokenize = 'unicode61');",
        )?;
        Ok(ColdIndex { db })
    }

    /// Whether `seq` is indexed.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn contains(&self, seq: u64) -> Result<bool, IndexError> {
        let n: i64 = self.db.query_row(
            "SELECT count(*) FROM cold WHERE seq = ?1",
            params![i64_of(seq)],
            |r| r.get(0),
        )?;
        Ok(n > 0)
    }

    /// Adds items (an item already indexed is skipped).
    ///
    /// # Errors
    /// SQLite errors.
    pub fn add(&mut self, items: &[ColdItem]) -> Result<(), IndexError> {
        let tx = self.db.transaction()?;
        for item in items {
            let known: i64 = tx.query_row(
                "SELECT count(*) FROM cold WHERE seq = ?1",
                params![i64_of(item.seq)],
                |r| r.get(0),
            )?;
            if known == 0 {
                tx.execute(
                    "INSERT INTO cold (what, content, seq, bytes) VALUES (?1, ?2, ?3, ?4)",
                    params![
                        item.what,
                        item.content,
                        i64_of(item.seq),
                        i64_of(item.content.len() as u64)
                    ],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The best `limit` matches of `query` (its words, all of them when some item has them
    /// all, else any), best first.
    ///
    /// # Errors
    /// SQLite errors.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, IndexError> {
        let words: Vec<String> = query
            .split_whitespace()
            .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
            .collect();
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let all = self.matching(&words.join(" "), limit)?;
        if !all.is_empty() || words.len() == 1 {
            return Ok(all);
        }
        self.matching(&words.join(" OR "), limit)
    }

    fn matching(&self, fts_query: &str, limit: usize) -> Result<Vec<Hit>, IndexError> {
        let mut stmt = self.db.prepare(
            "SELECT seq, what, bytes, snippet(cold, 1, '[', ']', '…', 16) FROM cold \
             WHERE cold MATCH ?1 ORDER BY bm25(cold) LIMIT ?2",
        )?;
        let rows = stmt.query_map(
            params![fts_query, i64::try_from(limit).unwrap_or(i64::MAX)],
            |r| {
                Ok(Hit {
                    seq: u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                    what: r.get(1)?,
                    bytes: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                    snippet: r.get(3)?,
                })
            },
        )?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(seq: u64, what: &str, content: &str) -> ColdItem {
        ColdItem {
            seq,
            what: what.into(),
            content: content.into(),
        }
    }

    #[test]
    fn finds_sunk_items_by_their_words_best_first() {
        let mut idx = ColdIndex::new().unwrap();
        idx.add(&[
            item(5, "read_file {\"path\":\"a\"}", "the quick zebra jumps"),
            item(
                9,
                "read_file {\"path\":\"b\"}",
                "a zebra and a zebra crossing",
            ),
            item(12, "shell", "nothing here"),
        ])
        .unwrap();
        let hits = idx.search("zebra", 10).unwrap();
        assert_eq!(hits.iter().map(|h| h.seq).collect::<Vec<_>>(), [9, 5]);
        assert!(hits[0].snippet.contains("[zebra]"), "{:?}", hits[0]);
        assert_eq!(hits[1].bytes, 21);
        // All words when some item has them all, else any.
        assert_eq!(idx.search("quick zebra", 10).unwrap().len(), 1);
        assert_eq!(idx.search("quick nothing", 10).unwrap().len(), 2);
        // FTS syntax in a query is only words.
        assert!(idx.search("\"zebra OR ) NEAR(", 10).is_ok());
        assert!(idx.contains(12).unwrap() && !idx.contains(13).unwrap());
    }

    #[test]
    fn an_item_is_indexed_once() {
        let mut idx = ColdIndex::new().unwrap();
        idx.add(&[item(1, "x", "alpha")]).unwrap();
        idx.add(&[item(1, "x", "alpha")]).unwrap();
        assert_eq!(idx.search("alpha", 10).unwrap().len(), 1);
    }
}
