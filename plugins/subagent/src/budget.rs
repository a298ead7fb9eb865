//! Step budgets of `agent` children (issue 23 item 19): a child may make at most half of the
//! model requests its parent's turn has left, less what earlier children of the same turn
//! were granted, so a parent's whole tree stays within the parent's own budget however its
//! model fans out (a small model once ran ten minutes on one question through
//! grandchildren). A named profile's `max_steps` is a further cap, never a widening. The grant
//! is taken whole when the child starts (whatever it uses of it), so concurrent children draw
//! from one pool without a race.

use std::collections::HashMap;
use std::sync::Mutex;

/// What each parent's current turn has handed out.
#[derive(Debug, Default)]
pub struct Budgets {
    /// Parent session → (its `steps_left` when last seen, steps granted to children since its
    /// turn began).
    drawn: Mutex<HashMap<String, (u64, u64)>>,
}

/// Why no child may start: the parent's turn has too few steps left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    /// The parent's steps left.
    pub left: u64,
    /// Already granted to its children this turn.
    pub drawn: u64,
}

impl Budgets {
    /// The steps a new child of `parent` may make: `None` when the parent's budget is unknown
    /// (no turn runs, an older loop), else half of what is left after earlier grants, capped
    /// by `configured`.
    ///
    /// # Errors
    /// [`Exhausted`] when that half is zero.
    pub fn grant(
        &self,
        parent: &str,
        steps_left: Option<u64>,
        configured: Option<u64>,
    ) -> Result<Option<u64>, Exhausted> {
        let Some(left) = steps_left else {
            return Ok(configured);
        };
        let mut drawn = self
            .drawn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = drawn.entry(parent.to_owned()).or_insert((left, 0));
        if left > entry.0 {
            // More left than last time: a new turn, with its own budget.
            *entry = (left, 0);
        }
        entry.0 = left;
        let half = left.saturating_sub(entry.1) / 2;
        if half == 0 {
            return Err(Exhausted {
                left,
                drawn: entry.1,
            });
        }
        let grant = configured.map_or(half, |c| c.min(half));
        entry.1 += grant;
        Ok(Some(grant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_share_half_of_what_is_left_and_a_new_turn_starts_afresh() {
        let b = Budgets::default();
        assert_eq!(b.grant("p", None, Some(7)), Ok(Some(7)));
        assert_eq!(b.grant("p", Some(199), None), Ok(Some(99)));
        assert_eq!(b.grant("p", Some(198), None), Ok(Some(49)));
        assert_eq!(b.grant("p", Some(198), Some(10)), Ok(Some(10)));
        // 197 left, 158 drawn: 19 more.
        assert_eq!(b.grant("p", Some(197), None), Ok(Some(19)));
        assert_eq!(
            b.grant("q", Some(1), None),
            Err(Exhausted { left: 1, drawn: 0 })
        );
        // A new turn of p.
        assert_eq!(b.grant("p", Some(199), None), Ok(Some(99)));
    }
}
