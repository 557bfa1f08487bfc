//! A push parser of `text/event-stream` (server-sent events): bytes in,
//! complete events out. Pure (no IO), so it can be unit-tested on every split
//! of a stream and fuzzed.
//!
//! Source: docs/control-plane-api.md "Agent server" (`POST /runs/stream` answers
//! `text/event-stream`; each event is `event: <name>` and `data: <json>` lines
//! ending with a blank line; `:` lines are heartbeats) and the event-stream
//! interpretation rules of the HTML standard ("server-sent events"): lines end
//! with CRLF, LF or CR; `field: value` with one optional space after the colon;
//! several `data` lines join with `\n`; an event is dispatched at a blank line
//! and only when it has data; a leading UTF-8 BOM is ignored; an unfinished
//! event at the end of the stream is dropped.
//!
//! Why not a crate: `eventsource-stream` and `sse-stream` wrap a `Stream` of
//! bytes, while the client needs a pure, synchronous parser it can feed the
//! chunks of `reqwest::Response::chunk` under its own idle timeout (and that a
//! fuzz target can drive without a runtime). The format is ~60 lines of code.

/// Largest event (all its lines together) or single line the parser buffers,
/// in bytes (16 MiB): a server that never ends a line or an event must not
/// exhaust memory. A `values` chunk of a big state is the largest event one
/// expects; the real limit is not documented.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched server-sent event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field; `message` when the event had none (HTML standard).
    pub event: String,
    /// The `data` lines joined with `\n` (without a trailing newline).
    pub data: String,
    /// The last `id` field seen, if any.
    pub id: Option<String>,
}

/// The parser's only failure: a line or an event larger than
/// [`MAX_EVENT_BYTES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a server-sent event is larger than {limit} bytes")]
pub struct SseTooLarge {
    /// The limit that was passed, in bytes.
    pub limit: usize,
}

/// Incremental `text/event-stream` parser.
///
/// Feed network reads with [`SseParser::push`] (any split, even inside a
/// `\r\n` pair or a UTF-8 sequence); each call returns the events completed by
/// that chunk. [`SseParser::finish`] ends the stream (an event without its
/// blank line is dropped, as the HTML standard says).
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` at the start of the next one
    /// belongs to the same line end.
    after_cr: bool,
    /// The BOM check is done (only the first bytes of a stream may hold one).
    started: bool,
    event: String,
    data: String,
    /// `data` has at least one line (so an empty `data:` still dispatches).
    has_data: bool,
    id: Option<String>,
    /// Bytes buffered for the current event (lines already interpreted).
    event_bytes: usize,
    /// Comment (heartbeat) lines seen so far.
    comments: u64,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many `:` comment lines (heartbeats) the stream has had.
    pub fn comments(&self) -> u64 {
        self.comments
    }

    /// Feeds the next bytes of the stream; returns the events they complete.
    ///
    /// Errors: [`SseTooLarge`] when a line or an event grows past
    /// [`MAX_EVENT_BYTES`]; the parser must not be used afterwards.
    pub fn push(&mut self, mut chunk: &[u8]) -> Result<Vec<SseEvent>, SseTooLarge> {
        let mut out = Vec::new();
        if !self.started {
            // A BOM may be split over the first chunks: wait for 3 bytes.
            let mut head = std::mem::take(&mut self.line);
            head.extend_from_slice(chunk);
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            if head.len() < BOM.len() && BOM.starts_with(&head) {
                self.line = head;
                return Ok(out);
            }
            self.started = true;
            let rest = head.strip_prefix(BOM).unwrap_or(&head).to_vec();
            return self.push_bytes(&rest, out);
        }
        // An empty read says nothing about the line end: a `\r` at the end
        // of the previous read may still be followed by its `\n` (found by
        // the `sse_stream` fuzz target: the `\n` then ended an event early).
        if chunk.is_empty() {
            return Ok(out);
        }
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        self.push_bytes(chunk, std::mem::take(&mut out))
    }

    fn push_bytes(
        &mut self,
        mut chunk: &[u8],
        mut out: Vec<SseEvent>,
    ) -> Result<Vec<SseEvent>, SseTooLarge> {
        while let Some(end) = chunk.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.line.extend_from_slice(&chunk[..end]);
            let crlf = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if crlf {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.line_done(&line)? {
                out.push(event);
            }
        }
        self.line.extend_from_slice(chunk);
        if self.line.len() + self.event_bytes > MAX_EVENT_BYTES {
            return Err(SseTooLarge {
                limit: MAX_EVENT_BYTES,
            });
        }
        Ok(out)
    }

    /// Interprets one complete line (without its line end).
    fn line_done(&mut self, line: &[u8]) -> Result<Option<SseEvent>, SseTooLarge> {
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line[0] == b':' {
            self.comments += 1;
            return Ok(None);
        }
        self.event_bytes += line.len() + 1;
        if self.event_bytes > MAX_EVENT_BYTES {
            return Err(SseTooLarge {
                limit: MAX_EVENT_BYTES,
            });
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // An id with NUL is ignored (HTML standard).
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            // `retry` and unknown fields are ignored: the client does not
            // reconnect (a stateless run cannot be resumed).
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        self.event_bytes = 0;
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data,
            id: self.id.clone(),
        })
    }

    /// Ends the stream. Returns true when an event or line was left
    /// unfinished (and so dropped): the server closed in the middle of an
    /// event.
    pub fn finish(&mut self) -> bool {
        let partial =
            !self.line.is_empty() && self.started || self.has_data || !self.event.is_empty();
        self.line.clear();
        self.event.clear();
        self.data.clear();
        self.has_data = false;
        self.event_bytes = 0;
        partial
    }
}

/// Parses a whole stream at once (for tests and fuzzing): the events, and
/// whether an unfinished event was dropped at the end.
///
/// Errors: [`SseTooLarge`], as [`SseParser::push`].
pub fn parse_all(bytes: &[u8]) -> Result<(Vec<SseEvent>, bool), SseTooLarge> {
    let mut p = SseParser::new();
    let events = p.push(bytes)?;
    Ok((events, p.finish()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_empty_read_between_cr_and_lf_changes_nothing() {
        // The input the fuzz target found: "data" then CR, an empty read, LF.
        let body = b"da\n\n\ndata\rme\r\n";
        let (whole, partial) = parse_all(body).unwrap();
        let mut p = SseParser::new();
        let mut split = Vec::new();
        for chunk in [&body[..13], &body[13..13], &body[13..]] {
            split.extend(p.push(chunk).unwrap());
        }
        assert_eq!(whole, split);
        assert_eq!(partial, p.finish());
        assert!(whole.is_empty(), "no blank line, no event: {whole:?}");
    }

    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: None,
        }
    }

    const STREAM: &str = "\u{feff}: heartbeat\r\n\
        event: metadata\r\ndata: {\"run_id\":\"r\",\"attempt\":1}\r\n\r\n\
        :\n\
        event: updates\ndata: {\"echo\":\ndata:  {\"text\":\"h\u{e9}llo\"}}\n\n\
        event:values\rdata:{}\r\r\
        event: error\ndata: {\"error\":\"ValueError\",\"message\":\"boom\"}\n\n\
        event: ignored-without-data\n\n\
        data\n\n\
        event: end\ndata: null\n\n\
        \x20data: a line starting with a space is an unknown field\n\n\
        event: partial\ndata: 1";

    fn expected() -> Vec<SseEvent> {
        vec![
            ev("metadata", r#"{"run_id":"r","attempt":1}"#),
            ev("updates", "{\"echo\":\n {\"text\":\"h\u{e9}llo\"}}"),
            ev("values", "{}"),
            ev("error", r#"{"error":"ValueError","message":"boom"}"#),
            ev("message", ""),
            ev("end", "null"),
        ]
    }

    #[test]
    fn whole_stream() {
        let (events, partial) = parse_all(STREAM.as_bytes()).unwrap();
        assert_eq!(events, expected());
        assert!(partial, "the last event has no blank line");
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let bytes = STREAM.as_bytes();
        for at in 0..=bytes.len() {
            let mut p = SseParser::new();
            let mut events = p.push(&bytes[..at]).unwrap();
            events.extend(p.push(&bytes[at..]).unwrap());
            assert_eq!(events, expected(), "split at {at}");
            assert!(p.finish());
            assert_eq!(p.comments(), 2, "split at {at}");
        }
    }

    #[test]
    fn byte_by_byte_and_two_splits() {
        let bytes = STREAM.as_bytes();
        let mut p = SseParser::new();
        let mut events = Vec::new();
        for b in bytes {
            events.extend(p.push(std::slice::from_ref(b)).unwrap());
        }
        assert_eq!(events, expected());
        for a in (0..bytes.len()).step_by(7) {
            for b in a..=bytes.len() {
                let mut p = SseParser::new();
                let mut events = p.push(&bytes[..a]).unwrap();
                events.extend(p.push(&bytes[a..b]).unwrap());
                events.extend(p.push(&bytes[b..]).unwrap());
                assert_eq!(events, expected(), "split at {a}, {b}");
            }
        }
    }

    #[test]
    fn clean_end_and_ids() {
        let (events, partial) = parse_all(b"id: 7\nevent: a\ndata: 1\n\n").unwrap();
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert!(!partial);
        let (events, partial) = parse_all(b"").unwrap();
        assert!(events.is_empty() && !partial);
    }

    proptest::proptest! {
        /// Any bytes, split anywhere: no panic, and the same events as in
        /// one piece (what a fuzz target of the parser would check).
        #[test]
        fn any_bytes_any_split(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(b"\r\n: datevnid".to_vec()),
                    proptest::num::u8::ANY,
                ],
                0..200,
            ),
            at in 0usize..200,
        ) {
            let at = at.min(bytes.len());
            let whole = parse_all(&bytes).unwrap();
            let mut p = SseParser::new();
            let mut events = p.push(&bytes[..at]).unwrap();
            events.extend(p.push(&bytes[at..]).unwrap());
            proptest::prop_assert_eq!(&events, &whole.0);
            proptest::prop_assert_eq!(p.finish(), whole.1);
        }
    }

    #[test]
    fn endless_line_is_refused() {
        let mut p = SseParser::new();
        let chunk = vec![b'x'; 1024 * 1024];
        let mut result = Ok(vec![]);
        for _ in 0..=MAX_EVENT_BYTES / chunk.len() {
            result = p.push(&chunk);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(
            result.unwrap_err(),
            SseTooLarge {
                limit: MAX_EVENT_BYTES
            }
        );
    }
}
