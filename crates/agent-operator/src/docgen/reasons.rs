//! The reasons reference (docs/TROUBLESHOOTING.md), from the registry
//! [`crate::api::reasons::REASONS`].

use std::fmt::Write as _;

use super::cell;
use crate::api::reasons::REASONS;

/// The table of every reason.
pub fn table() -> String {
    let mut out = String::from(
        "| Reason | Kind | Condition | Event | What it means | What to do |\n|---|---|---|---|---|---|\n",
    );
    for r in &REASONS {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} |",
            r.reason,
            r.kinds.join(", "),
            cell(r.condition),
            if r.event.is_empty() { "–" } else { r.event },
            cell(r.meaning),
            cell(r.action)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::reasons::Reason;

    #[test]
    fn every_reason_is_a_row_and_the_events_outside_api_have_theirs() {
        let text = table();
        assert_eq!(text.lines().count(), REASONS.len() + 2);
        assert!(Reason::of(crate::plan::verdict::OUT_OF_BAND_REVISION).is_some());
    }
}
