//! An incremental decoder of server-sent events: bytes in (in whatever pieces the network
//! delivers), the `data` of each complete event out. Only `data` matters to chat completions;
//! other fields and comments are skipped.

/// Decoder state between network reads.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    /// Bytes of a line not yet terminated.
    line: Vec<u8>,
    /// The data lines of the event being read (joined by newlines, as the spec says).
    data: Option<String>,
}

impl SseDecoder {
    /// Feeds `bytes`; returns the data of every event they complete.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                self.line.push(byte);
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if let Some(data) = self.line_done(&line) {
                events.push(data);
            }
        }
        events
    }

    /// The last event, if the stream ended without the blank line that completes it.
    pub(crate) fn finish(&mut self) -> Option<String> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            // A completed line cannot complete an event by itself; only a blank line does.
            let _ = self.line_done(&line);
        }
        self.data.take()
    }

    fn line_done(&mut self, line: &[u8]) -> Option<String> {
        if line.is_empty() {
            return self.data.take();
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_reads_and_line_endings() {
        let mut d = SseDecoder::default();
        let mut got = d.push(b": keep-alive\n\ndata: {\"a\":");
        got.extend(d.push(b" 1}\r\n\r\nevent: x\ndata:2\ndata: 3\n"));
        got.extend(d.push(b"\ndata: [DONE]\n\n"));
        assert_eq!(got, vec!["{\"a\": 1}", "2\n3", "[DONE]"]);
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn multibyte_text_split_between_reads_survives() {
        let mut d = SseDecoder::default();
        let bytes = "data: héllo\n\n".as_bytes();
        let (a, b) = bytes.split_at(8);
        let mut got = d.push(a);
        got.extend(d.push(b));
        assert_eq!(got, vec!["héllo"]);
    }

    #[test]
    fn an_unterminated_last_event_is_flushed_at_the_end() {
        let mut d = SseDecoder::default();
        assert!(d.push(b"data: last").is_empty());
        assert_eq!(d.finish().as_deref(), Some("last"));
    }
}
