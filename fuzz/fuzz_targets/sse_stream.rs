//! Fuzz target: the agent server's `text/event-stream` answer of
//! `POST /runs/stream` (docs/control-plane-api.md "Agent server": `event:`/`data:` lines, `:`
//! heartbeats, events ended by a blank line, multi-line data, a stream that
//! may close without `end`), as bytes split into network reads anywhere.
//!
//! Properties: the parser never panics; the events (and whether the stream
//! ended inside an event) do not depend on where the bytes were split; an
//! over-long line is refused the same way however it arrives.

#![no_main]

use agent_operator::agentserver::sse::{SseParser, parse_all};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    // The first two bytes choose the split points; the rest is the stream.
    let (cuts, body) = match input {
        [a, b, rest @ ..] => ((*a as usize, *b as usize), rest),
        _ => return,
    };
    let whole = parse_all(body);
    let mut p = SseParser::new();
    let mut events = Vec::new();
    let mut refused = false;
    let (first, second) = (cuts.0.min(body.len()), cuts.1.min(body.len()));
    let (lo, hi) = (first.min(second), first.max(second));
    for chunk in [&body[..lo], &body[lo..hi], &body[hi..]] {
        match p.push(chunk) {
            Ok(mut e) => events.append(&mut e),
            Err(_) => {
                refused = true;
                break;
            }
        }
    }
    match whole {
        Ok((all, partial)) => {
            assert!(!refused, "refused only when split");
            assert_eq!(all, events, "events depend on the split");
            assert_eq!(partial, p.finish(), "end state depends on the split");
        }
        Err(_) => assert!(refused, "accepted only when split"),
    }
});
