//! Go's formatting where our messages must read exactly as the Go programs we imitate print
//! them (kube-apiserver's validation and patch errors, gorilla JSON-RPC's errors, the ages
//! kubectl prints).

/// Go's `strconv.Quote` (also what `%q` prints for a string): the quoted form messages of
/// Kubernetes and gorilla JSON-RPC carry, which callers compare byte for byte.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The name Go's `encoding/json` gives a JSON value's type in its errors ("cannot unmarshal
/// array into …").
pub fn json_type(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Formats a duration as apimachinery's `duration.HumanDuration` does (`5s`, `3m20s`, `45h`,
/// `2d`, `3y120d`): about two significant figures, `0s` for up to a second in the future and
/// `<invalid>` beyond that. `seconds` is the elapsed time, negative for the future.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_matches_apimachinery() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (119, "119s"),
            (200, "3m20s"),
            (5 * 3600 + 30 * 60, "5h30m"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (800 * 86400, "2y70d"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn quotes_as_strconv_quote() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("\n\t\u{7}\u{1}"), r#""\n\t\a\x01""#);
        assert_eq!(quote("ünï"), "\"ünï\"");
    }
}
