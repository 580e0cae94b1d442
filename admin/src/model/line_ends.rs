//! Line ends of scripts and params: always LF. A browser sends a text area's text with CRLF,
//! and a shell script saved that way fails on its executor (`syntax error: unexpected end of
//! file`), so every entry point (API, console, XXL-JOB import) stores and sends LF only.

/// `text` with every CRLF and lone CR turned into LF.
pub fn to_lf(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_string();
    }
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Replaces `text` by [`to_lf`] of it, without copying text that has no CR.
pub fn make_lf(text: &mut String) {
    if text.contains('\r') {
        *text = to_lf(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crlf_and_lone_cr_become_lf() {
        assert_eq!(to_lf("a\r\nb\rc\nd\r\n"), "a\nb\nc\nd\n");
        assert_eq!(to_lf("\r\r\n"), "\n\n");
        assert_eq!(to_lf("no carriage return"), "no carriage return");
        let mut text = "echo hi\r\n".to_string();
        make_lf(&mut text);
        assert_eq!(text, "echo hi\n");
    }
}
