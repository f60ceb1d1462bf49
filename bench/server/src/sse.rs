//! Server-sent events read from a body that arrives in pieces: lines end in CRLF or LF, a blank line ends
//! an event, comments (heartbeats) are skipped.

/// One event: its name and its data (the `data:` lines joined by newlines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) name: String,
    pub(crate) data: String,
    /// Its `id:` field, when it had one (a resumable run's events do).
    pub(crate) id: Option<String>,
}

/// Turns bytes into events as they come.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    /// Bytes of a line not ended yet.
    partial: Vec<u8>,
    name: Option<String>,
    data: Option<String>,
    id: Option<String>,
}

impl Parser {
    /// Reads `bytes`, pushing every event they end onto `out`.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<Event>) {
        for &byte in bytes {
            if byte != b'\n' {
                self.partial.push(byte);
                continue;
            }
            let mut line = std::mem::take(&mut self.partial);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.line(&String::from_utf8_lossy(&line), out);
        }
    }

    fn line(&mut self, line: &str, out: &mut Vec<Event>) {
        if line.is_empty() {
            if self.name.is_some() || self.data.is_some() {
                out.push(Event {
                    name: self.name.take().unwrap_or_else(|| "message".to_owned()),
                    data: self.data.take().unwrap_or_default(),
                    id: self.id.take(),
                });
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.name = Some(value.to_owned()),
            "id" => self.id = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pieces: &[&[u8]]) -> Vec<Event> {
        let mut parser = Parser::default();
        let mut out = Vec::new();
        for piece in pieces {
            parser.feed(piece, &mut out);
        }
        out
    }

    fn event(name: &str, data: &str) -> Event {
        Event { name: name.to_owned(), data: data.to_owned(), id: None }
    }

    #[test]
    fn crlf_events_split_anywhere_come_out_whole() {
        let text = b"event: metadata\r\ndata: {\"run_id\":\"r\"}\r\n\r\nevent: values\r\ndata: {\"count\":3}\r\nid: 1-0\r\n\r\n";
        let whole = parse(&[text]);
        let values = Event { id: Some("1-0".to_owned()), ..event("values", "{\"count\":3}") };
        assert_eq!(whole, [event("metadata", "{\"run_id\":\"r\"}"), values]);
        for cut in 0..text.len() {
            assert_eq!(parse(&[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
        }
    }

    #[test]
    fn heartbeats_are_skipped_and_an_unfinished_event_is_not_given() {
        let events = parse(&[b": heartbeat\r\n\r\nevent: a\ndata: 1\ndata: 2\n\nevent: b\ndata: 3\n"]);
        assert_eq!(events, [event("a", "1\n2")]);
    }
}
