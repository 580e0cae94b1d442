//! The W3C `traceparent` header (`00-<trace id>-<span id>-<flags>`) that `RunRequest` carries
//! from the admin's `dispatch` span to the executor's `run` span. Parsed and written here once,
//! so the admin and the executor SDK read the same header the same way; each turns it into its
//! tracing library's span context.

use std::fmt;

/// The ids and flags a `traceparent` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Traceparent {
    /// 16 bytes, never all zero.
    pub trace_id: u128,
    /// 8 bytes, never all zero.
    pub span_id: u64,
    /// Trace flags; bit 0 is "sampled".
    pub flags: u8,
}

impl Traceparent {
    /// The header's parts; `None` for anything that is not a valid `traceparent` (a bad header
    /// is ignored, never an error: tracing must not refuse work). Later versions' extra fields
    /// are ignored, as the W3C text asks; version `ff` is invalid.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if !is_hex(version, 2) || version == "ff" {
            return None;
        }
        let parsed = Self {
            trace_id: u128::from_str_radix(hex(trace, 32)?, 16).ok()?,
            span_id: u64::from_str_radix(hex(span, 16)?, 16).ok()?,
            flags: u8::from_str_radix(hex(flags.get(..2)?, 2)?, 16).ok()?,
        };
        (parsed.trace_id != 0 && parsed.span_id != 0).then_some(parsed)
    }
}

/// Writes the version-00 header.
impl fmt::Display for Traceparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id, self.span_id, self.flags
        )
    }
}

/// `text` when it is exactly `digits` hex digits (`from_str_radix` alone would take a sign).
fn hex(text: &str, digits: usize) -> Option<&str> {
    is_hex(text, digits).then_some(text)
}

fn is_hex(text: &str, digits: usize) -> bool {
    text.len() == digits && text.bytes().all(|byte| byte.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_header_round_trips() {
        let parsed = Traceparent::parse(HEADER).expect("valid");
        assert_eq!(parsed.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(parsed.span_id, 0x00f067aa0ba902b7);
        assert_eq!(parsed.flags, 1);
        assert_eq!(parsed.to_string(), HEADER);
    }

    #[test]
    fn junk_and_zero_ids_are_ignored() {
        for junk in [
            "",
            "00-abc-def-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-x1",
        ] {
            assert_eq!(Traceparent::parse(junk), None, "{junk}");
        }
    }

    #[test]
    fn a_later_version_with_more_fields_is_read() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert!(Traceparent::parse(later).is_some());
    }
}
