//! Drift fights: another writer (the UI, Terraform, a script) keeps
//! changing a field of the remote deployment and the operator keeps
//! patching it back, one PATCH per drift check, each possibly a new
//! revision, i.e. a build on the real service (docs/control-plane-api.md,
//! "Requests": what a PATCH starts).
//!
//! The fight is capped: a correction of drift (a PATCH sent because the
//! remote differed from a spec whose generation did not change, not one
//! caused by a spec change, a Secret value change or a create) is
//! remembered in `status.driftCorrections` with its fields and time. Once a
//! field was corrected [`FIGHT_CORRECTIONS`] times within [`FIGHT_WINDOW`],
//! the next difference in it is not corrected but reported
//! (`Stalled`/`DriftFight`, one Warning event) until a new generation or a
//! redeploy request clears the memory. The memory lives in status, so a
//! restarted operator does not start the fight over.
//!
//! Pure functions, called by the pass: [`carried`] (what it starts from),
//! [`fought`] (through `decide::after_read`), [`remember`] (after a
//! correction) and [`message`].

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::api::deployment::{
    AgentDeploymentStatus, DRIFT_CORRECTIONS_LIMIT, DriftCorrection, REDEPLOY_ANNOTATION,
};

/// Corrections of one field within [`FIGHT_WINDOW`] after which the next
/// difference is not corrected: at most 3 PATCHes per object and hour.
pub const FIGHT_CORRECTIONS: usize = 3;

/// The window of [`FIGHT_CORRECTIONS`]: one hour.
pub const FIGHT_WINDOW: Duration = Duration::from_secs(3600);

/// The corrections a pass starts from: those in `status`, or none when the
/// generation changed since the status was written or a redeploy is
/// requested (either is a human saying what the deployment should be).
pub fn carried(
    status: &AgentDeploymentStatus,
    generation: Option<i64>,
    redeploy_requested: bool,
) -> Vec<DriftCorrection> {
    if status.observed_generation != generation || redeploy_requested {
        return Vec::new();
    }
    status.drift_corrections.clone()
}

/// The fields of `fields` (a PATCH about to correct drift) that
/// `corrections` holds [`FIGHT_CORRECTIONS`] times or more, sorted: another
/// writer is fighting over them. Empty: correct.
///
/// Time plays no part here: [`remember`] keeps only the corrections within
/// [`FIGHT_WINDOW`] of the newest, and nothing is added once the fight is
/// found, so the finding stands until the memory is cleared.
pub fn fought(corrections: &[DriftCorrection], fields: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = fields
        .iter()
        .filter(|f| {
            corrections
                .iter()
                .filter(|c| c.fields.iter().any(|g| g == *f))
                .count()
                >= FIGHT_CORRECTIONS
        })
        .map(|f| (*f).to_owned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `corrections` with a correction of `fields` at `now` added last: the
/// entries older than [`FIGHT_WINDOW`] before `now` (or with a time that
/// does not parse) are dropped, and at most [`DRIFT_CORRECTIONS_LIMIT`] of
/// the newest kept.
pub fn remember(
    corrections: &[DriftCorrection],
    fields: &[&str],
    now: Timestamp,
) -> Vec<DriftCorrection> {
    let window = SignedDuration::try_from(FIGHT_WINDOW).unwrap_or(SignedDuration::MAX);
    let since = now.checked_sub(window).unwrap_or(Timestamp::MIN);
    let mut kept: Vec<DriftCorrection> = corrections
        .iter()
        .filter(|c| c.time.parse::<Timestamp>().is_ok_and(|t| t > since))
        .cloned()
        .collect();
    kept.push(DriftCorrection {
        fields: fields.iter().map(|f| (*f).to_owned()).collect(),
        time: now.to_string(),
    });
    let extra = kept.len().saturating_sub(DRIFT_CORRECTIONS_LIMIT);
    kept.drain(..extra);
    kept
}

/// The message of `Stalled`/`DriftFight` about remote deployment `id` and
/// the `fields` fought over: stable while the fight lasts (no times), so
/// it is written and announced once. `others`: the other AgentDeployments
/// of the cluster that hold or name the deployment (`namespace/name`), the
/// writer it most likely is; empty when none does.
pub fn message(id: &str, fields: &[String], others: &[&str]) -> String {
    let who = if others.is_empty() {
        "find the other writer (the UI, Terraform, a script) and stop it, or put its value in the spec".to_owned()
    } else {
        format!(
            "AgentDeployment {} of this cluster also holds or names it: a deployment has one owner, so delete or change the one that should not manage it, or put its value in the spec",
            others.join(", ")
        )
    };
    format!(
        "another writer keeps changing {} of remote deployment {id}: corrected {FIGHT_CORRECTIONS} times within {} min and changed again; the operator stops correcting until the spec changes or a redeploy is requested (annotation {REDEPLOY_ANNOTATION}); {who}",
        fields.join(", "),
        FIGHT_WINDOW.as_secs() / 60,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOP: &str = "source_config.build_on_push";
    const REF: &str = "source_revision_config";

    fn at(minutes: i64) -> Timestamp {
        "2026-01-01T00:00:00Z"
            .parse::<Timestamp>()
            .unwrap()
            .checked_add(SignedDuration::from_mins(minutes))
            .unwrap()
    }

    /// The memory after corrections of `fields` at the given minutes.
    fn history(corrections: &[(i64, &[&str])]) -> Vec<DriftCorrection> {
        corrections
            .iter()
            .fold(Vec::new(), |h, (m, f)| remember(&h, f, at(*m)))
    }

    /// (what, the memory, the fields about to be corrected, the fight found).
    type Case<'a> = (&'a str, Vec<DriftCorrection>, &'a [&'a str], Vec<&'a str>);

    #[test]
    fn three_corrections_of_a_field_within_an_hour_are_a_fight() {
        let cases: Vec<Case<'_>> = vec![
            ("no memory: correct", vec![], &[BOP], vec![]),
            (
                "twice: correct",
                history(&[(0, &[BOP]), (5, &[BOP])]),
                &[BOP],
                vec![],
            ),
            (
                "three times within the hour: stop",
                history(&[(0, &[BOP]), (5, &[BOP]), (10, &[BOP])]),
                &[BOP],
                vec![BOP],
            ),
            (
                "three times, now with another field too: stop, naming the fought one",
                history(&[(0, &[BOP]), (5, &[BOP]), (10, &[BOP])]),
                &[REF, BOP],
                vec![BOP],
            ),
            (
                "three corrections of another field: correct this one",
                history(&[(0, &[REF]), (5, &[REF]), (10, &[REF])]),
                &[BOP],
                vec![],
            ),
            (
                "fields corrected together count for each",
                history(&[(0, &[BOP, REF]), (5, &[BOP]), (10, &[REF, BOP])]),
                &[REF, BOP],
                vec![BOP],
            ),
            (
                "three, but the first one more than an hour before the third: correct",
                history(&[(0, &[BOP]), (40, &[BOP]), (70, &[BOP])]),
                &[BOP],
                vec![],
            ),
            (
                "every 31 minutes forever: never a fight (2 per hour)",
                history(&[(0, &[BOP]), (31, &[BOP]), (62, &[BOP]), (93, &[BOP])]),
                &[BOP],
                vec![],
            ),
            (
                "every 20 minutes: the third within the hour makes it one",
                history(&[(0, &[BOP]), (20, &[BOP]), (40, &[BOP])]),
                &[BOP],
                vec![BOP],
            ),
        ];
        for (what, memory, fields, want) in cases {
            assert_eq!(fought(&memory, fields), want, "{what}");
        }
    }

    #[test]
    fn the_memory_keeps_the_last_hour_and_a_bounded_list() {
        let h = history(&[(0, &[BOP]), (30, &[REF]), (61, &[BOP])]);
        let times: Vec<&str> = h.iter().map(|c| c.time.as_str()).collect();
        assert_eq!(times, ["2026-01-01T00:30:00Z", "2026-01-01T01:01:00Z"]);
        assert_eq!(h[1].fields, [BOP]);

        let many: Vec<(i64, &[&str])> = (0..25).map(|m| (m, &[REF][..])).collect();
        let h = history(&many);
        assert_eq!(h.len(), DRIFT_CORRECTIONS_LIMIT);
        assert_eq!(h.last().unwrap().time, at(24).to_string(), "newest kept");

        let garbled = vec![DriftCorrection {
            fields: vec![BOP.into()],
            time: "yesterday".into(),
        }];
        assert_eq!(remember(&garbled, &[BOP], at(0)).len(), 1);
    }

    #[test]
    fn a_new_generation_or_a_redeploy_clears_the_memory() {
        let status = AgentDeploymentStatus {
            observed_generation: Some(4),
            drift_corrections: history(&[(0, &[BOP]), (5, &[BOP]), (10, &[BOP])]),
            ..Default::default()
        };
        assert_eq!(carried(&status, Some(4), false).len(), 3);
        assert!(carried(&status, Some(5), false).is_empty(), "spec changed");
        assert!(carried(&status, Some(4), true).is_empty(), "redeploy");
    }

    #[test]
    fn the_message_names_the_fields_and_the_way_out() {
        let m = message("d-1", &[BOP.to_owned()], &[]);
        assert!(m.contains(BOP) && m.contains("d-1"), "{m}");
        assert!(m.contains("another writer"), "{m}");
        assert!(m.contains("until the spec changes"), "{m}");
        assert!(m.contains(REDEPLOY_ANNOTATION), "{m}");
        assert!(m.contains("the UI, Terraform"), "{m}");
        // The other writer named, when it is an object of the cluster.
        let named = message("d-1", &[BOP.to_owned()], &["team-b/agent"]);
        assert!(named.contains("AgentDeployment team-b/agent"), "{named}");
        assert!(!named.contains("the UI, Terraform"), "{named}");
    }
}
