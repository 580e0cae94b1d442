//! The one-line JSON result, built field by field in a fixed order (no serde dependency for a
//! flat object of numbers, strings, nulls and one list).

/// A flat JSON object under construction.
#[derive(Debug, Default)]
pub struct JsonLine {
    fields: Vec<String>,
}

impl JsonLine {
    pub fn new() -> JsonLine {
        JsonLine::default()
    }

    /// A number or literal written as given (integers, `true`, preformatted floats).
    pub fn raw(&mut self, key: &str, value: impl std::fmt::Display) -> &mut JsonLine {
        self.fields.push(format!("\"{key}\":{value}"));
        self
    }

    /// A float with a fixed number of decimals.
    pub fn float(&mut self, key: &str, value: f64, decimals: usize) -> &mut JsonLine {
        self.raw(key, format!("{value:.decimals$}"))
    }

    /// A float, or `null` when it was not measured.
    pub fn float_or_null(
        &mut self,
        key: &str,
        value: Option<f64>,
        decimals: usize,
    ) -> &mut JsonLine {
        match value {
            Some(value) => self.float(key, value, decimals),
            None => self.raw(key, "null"),
        }
    }

    /// An integer, or `null` when it was not measured.
    pub fn int_or_null(&mut self, key: &str, value: Option<i64>) -> &mut JsonLine {
        match value {
            Some(value) => self.raw(key, value),
            None => self.raw(key, "null"),
        }
    }

    /// A list of integers, `null` for the entries that were not measured.
    pub fn int_list(&mut self, key: &str, values: &[Option<i64>]) -> &mut JsonLine {
        let items: Vec<String> = values
            .iter()
            .map(|value| value.map_or("null".to_string(), |value| value.to_string()))
            .collect();
        self.raw(key, format!("[{}]", items.join(",")))
    }

    pub fn string(&mut self, key: &str, value: &str) -> &mut JsonLine {
        let value = escape(value);
        self.raw(key, format!("\"{value}\""))
    }

    pub fn finish(&self) -> String {
        format!("{{{}}}", self.fields.join(","))
    }
}

/// JSON string escaping of quotes, backslashes and control characters.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => escaped.push_str("\\\""),
            '\\' => escaped.push_str("\\\\"),
            c if (c as u32) < 0x20 => escaped.push_str(&format!("\\u{:04x}", c as u32)),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_their_order_and_nulls() {
        let line = JsonLine::new()
            .string("workload", "F1")
            .raw("n", 2000)
            .float("cpu", 1.234, 2)
            .int_or_null("recovery_ms", None)
            .int_list("takeover_ms", &[Some(1800), None])
            .finish();
        assert_eq!(
            line,
            "{\"workload\":\"F1\",\"n\":2000,\"cpu\":1.23,\"recovery_ms\":null,\
             \"takeover_ms\":[1800,null]}"
        );
    }

    #[test]
    fn strings_are_escaped() {
        let line = JsonLine::new().string("cpu", "a \"b\"\\\n").finish();
        assert_eq!(line, "{\"cpu\":\"a \\\"b\\\"\\\\\\u000a\"}");
    }
}
