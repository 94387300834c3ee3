//! What serde_json refuses in a `Value` but lets through in a `RawValue`, checked in one pass
//! over text already known to be JSON.
//!
//! A [`RawValue`](serde_json::value::RawValue) is checked for JSON's grammar when it is made
//! (serde_json scans it), but not for three rules a parse into a `serde_json::Value` also
//! applies: every `\u` escape of a surrogate is half of a pair, every number is a finite
//! `f64` (`1e400` is refused), and containers nest fewer than 128 deep (counted from the top
//! of the whole document, so a raw value may use only what its place leaves: [`MAX_DEPTH`]).
//! To those this crate adds one of its own (serde_json keeps the last): no object gives a key
//! twice, keys compared after decoding their escapes. A block kept as raw text and sent back
//! to the API must meet all four: otherwise the API, or this client reloading its transcript,
//! reads it differently or not at all.
//!
//! [`check`] applies them without decoding strings or building anything: string
//! bodies are skipped with `memchr2` (`"` or `\`), which is what makes it cheaper than a
//! second serde pass (the visitor it replaced decoded every string). The visitor is kept in
//! the tests as the reference this check is compared with.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::de::Error as _;

/// Containers in a raw value may nest this deep and no deeper, the value itself counting one.
///
/// serde_json refuses a document at its 128th nested container (`remaining_depth` starts at
/// 128), counted from the top of the document, and a raw value is always written inside
/// others. In this workspace a citation is inside 5 containers in a transcript line (entry,
/// message, content, block, citations) and 6 in a request body (body, messages, message,
/// content, block, citations); a server tool result inside 3 and 4; each level of a
/// tool_result's block content adds 2, and the transcript's rewritten-results entry wraps
/// content in 4. So a line or body holding a value at this limit nests at most about 108 of
/// the 127 serde_json reads, leaving room for wrappers not foreseen; the API sends values a
/// few levels deep. (Found by an attack: citations nested 123-127 deep, server tool results
/// 125-127, were accepted and the transcript line holding them could not be read again.)
pub(crate) const MAX_DEPTH: usize = 100;

/// Past this many keys in one object, duplicates are found with a hash set instead of a scan
/// of the keys so far (a hostile object of 400,000 keys stays linear).
const FEW_KEYS: usize = 16;

/// Checks `json`, one JSON value (as a `RawValue` holds it), against the rules a parse into
/// a `serde_json::Value` applies beyond the grammar, and refuses a key given twice in one
/// object.
///
/// # Errors
///
/// A `serde_json::Error` naming the rule and the byte offset: a lone surrogate escape, a
/// number out of `f64` range, nesting past [`MAX_DEPTH`], a key given twice (named), or, if `json` is
/// not JSON after all, the first byte that cannot start a value.
pub(crate) fn check(json: &str) -> Result<(), serde_json::Error> {
    Checker {
        text: json,
        bytes: json.as_bytes(),
        at: 0,
        // Room for the usual nesting and keys: one allocation each.
        frames: Vec::with_capacity(8),
        keys: Vec::with_capacity(16),
    }
    .run()
}

/// An open container: the keys of an object, `None` for an array.
type Frame<'a> = Option<Keys<'a>>;

/// The keys of one open object: the first few in [`Checker::keys`] from `start`, all of them
/// in `set` once there are more than [`FEW_KEYS`].
struct Keys<'a> {
    start: usize,
    set: Option<HashSet<Cow<'a, str>>>,
}

struct Checker<'a> {
    text: &'a str,
    bytes: &'a [u8],
    /// Byte offset of the next byte to read.
    at: usize,
    frames: Vec<Frame<'a>>,
    /// The keys of the open objects that have few, innermost last.
    keys: Vec<Cow<'a, str>>,
}

impl<'a> Checker<'a> {
    fn run(mut self) -> Result<(), serde_json::Error> {
        // Whether the next string is a key: after `{`, and after `,` in an object.
        let mut key_next = false;
        while let Some(&byte) = self.bytes.get(self.at) {
            match byte {
                b' ' | b'\t' | b'\n' | b'\r' | b':' => self.at += 1,
                b'{' | b'[' => {
                    if self.frames.len() == MAX_DEPTH {
                        return Err(self.error(&format!("nesting deeper than {MAX_DEPTH}")));
                    }
                    let frame = (byte == b'{').then(|| Keys {
                        start: self.keys.len(),
                        set: None,
                    });
                    key_next = frame.is_some();
                    self.frames.push(frame);
                    self.at += 1;
                }
                b'}' | b']' => {
                    if let Some(Some(keys)) = self.frames.pop() {
                        self.keys.truncate(keys.start);
                    }
                    key_next = false;
                    self.at += 1;
                }
                b',' => {
                    key_next = matches!(self.frames.last(), Some(Some(_)));
                    self.at += 1;
                }
                b'"' => {
                    let start = self.at;
                    let escaped = self.string()?;
                    if key_next {
                        self.key(start, escaped)?;
                        key_next = false;
                    }
                }
                b'-' | b'0'..=b'9' => self.number()?,
                b't' | b'f' | b'n' => self.literal()?,
                _ => return Err(self.error("not JSON")),
            }
        }
        Ok(())
    }

    /// Skips the string opening at `self.at`, checking its `\u` escapes; returns whether it
    /// has escapes.
    fn string(&mut self) -> Result<bool, serde_json::Error> {
        let mut at = self.at + 1;
        let mut escaped = false;
        loop {
            let Some(offset) =
                memchr::memchr2(b'"', b'\\', &self.bytes[at.min(self.bytes.len())..])
            else {
                self.at = self.bytes.len();
                return Err(self.error("a string without its closing quote"));
            };
            at += offset;
            if self.bytes[at] == b'"' {
                self.at = at + 1;
                return Ok(escaped);
            }
            escaped = true;
            at = if self.bytes.get(at + 1) == Some(&b'u') {
                self.unicode_escape(at)?
            } else {
                at + 2
            };
        }
    }

    /// Checks the `\uXXXX` escape at `at` as serde_json decodes it into a `String`: a
    /// trailing surrogate alone is refused, a leading one must be followed at once by an
    /// escaped trailing one. Returns the offset after the escape (after both halves of a pair).
    fn unicode_escape(&mut self, at: usize) -> Result<usize, serde_json::Error> {
        let unit = |start: usize| -> Option<u16> {
            let hex = self.text.get(start..start + 4)?;
            u16::from_str_radix(hex, 16).ok()
        };
        let lone = |checker: &mut Self| {
            checker.at = at;
            Err(checker.error("a lone surrogate escape"))
        };
        let Some(first) = unit(at + 2) else {
            self.at = at;
            return Err(self.error("a \\u escape without four hex digits"));
        };
        match first {
            0xDC00..=0xDFFF => lone(self),
            0xD800..=0xDBFF => {
                let paired = self.bytes.get(at + 6..at + 8) == Some(b"\\u")
                    && matches!(unit(at + 8), Some(0xDC00..=0xDFFF));
                if paired { Ok(at + 12) } else { lone(self) }
            }
            _ => Ok(at + 6),
        }
    }

    /// Adds the key whose string opens at `start` (and ends before `self.at`) to the
    /// innermost object, refusing one it already has.
    fn key(&mut self, start: usize, escaped: bool) -> Result<(), serde_json::Error> {
        let quoted = &self.text[start..self.at];
        let key = if escaped {
            // Rare: decode it, so `"a"` and `"\u0061"` are the same key.
            Cow::Owned(serde_json::from_str::<String>(quoted)?)
        } else {
            Cow::Borrowed(&quoted[1..quoted.len() - 1])
        };
        let Some(Some(keys)) = self.frames.last_mut() else {
            return Ok(());
        };
        let repeated = match &mut keys.set {
            Some(set) => !set.insert(key.clone()),
            None if self.keys.len() - keys.start < FEW_KEYS => {
                let repeated = self.keys[keys.start..].contains(&key);
                self.keys.push(key.clone());
                repeated
            }
            None => {
                let mut set: HashSet<Cow<'a, str>> = self.keys.drain(keys.start..).collect();
                let repeated = !set.insert(key.clone());
                keys.set = Some(set);
                repeated
            }
        };
        if repeated {
            // Escaped for display: the key comes from the server and ends up in a message.
            return Err(serde_json::Error::custom(format_args!(
                "key `{}` given twice in one object at byte {start}",
                key.escape_debug()
            )));
        }
        Ok(())
    }

    /// Skips the number at `self.at`, refusing one out of `f64` range (as serde_json does:
    /// an integer too large for 64 bits is read as an `f64`, which must be finite).
    fn number(&mut self) -> Result<(), serde_json::Error> {
        let start = self.at;
        let length = self.bytes[start..]
            .iter()
            .position(|byte| !matches!(byte, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .unwrap_or(self.bytes.len() - start);
        self.at = start + length;
        let token = &self.text[start..self.at];
        // Without an exponent, a number of fewer than 300 characters is below 1e300: finite
        // however serde_json reads it (u64, i64 or f64). Only the rest needs parsing.
        if token.len() < 300 && !token.contains(['e', 'E']) {
            return Ok(());
        }
        // serde_json's own reading, so the two agree on every spelling: Rust's `f64` parse
        // stops reading an exponent past 65535 (`1e655360` as `1e65536`), serde_json reads it
        // whole, so a long enough mantissa made them disagree (found by an attack).
        match serde_json::from_str::<f64>(token) {
            Ok(_) => Ok(()),
            Err(_) => {
                self.at = start;
                Err(self.error("a number out of range"))
            }
        }
    }

    /// Skips `true`, `false` or `null`.
    fn literal(&mut self) -> Result<(), serde_json::Error> {
        let rest = &self.bytes[self.at..];
        let length = [&b"true"[..], b"false", b"null"]
            .into_iter()
            .find(|literal| rest.starts_with(literal))
            .map(<[u8]>::len);
        match length {
            Some(length) => {
                self.at += length;
                Ok(())
            }
            None => Err(self.error("not JSON")),
        }
    }

    fn error(&self, what: &str) -> serde_json::Error {
        serde_json::Error::custom(format_args!("{what} at byte {}", self.at))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::value::RawValue;

    use super::check;

    /// The reference: a serde visitor that reads the value as serde_json reads one into a
    /// `Value` (every string decoded, every number parsed, every nesting counted), keeping
    /// nothing, and refuses a key given twice. It was the check before [`check`]; two attacks
    /// were run against it.
    struct Checked;

    impl<'de> serde::de::DeserializeSeed<'de> for Checked {
        type Value = ();

        fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
            deserializer.deserialize_any(self)
        }
    }

    impl<'de> serde::de::Visitor<'de> for Checked {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }

        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }

        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }

        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }

        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }

        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }

        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Checked)?.is_some() {}
            Ok(())
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            /// A key, borrowed from the text when it has no escapes.
            struct Key;
            impl<'de> serde::de::DeserializeSeed<'de> for Key {
                type Value = std::borrow::Cow<'de, str>;
                fn deserialize<D: serde::Deserializer<'de>>(
                    self,
                    d: D,
                ) -> Result<Self::Value, D::Error> {
                    d.deserialize_str(self)
                }
            }
            impl<'de> serde::de::Visitor<'de> for Key {
                type Value = std::borrow::Cow<'de, str>;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a key")
                }
                fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
                    Ok(std::borrow::Cow::Borrowed(key))
                }
                fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
                    Ok(std::borrow::Cow::Owned(key.to_owned()))
                }
            }
            // A short list for the usual handful of keys; a set past that, so a huge object
            // costs no more than linear time.
            let mut few: Vec<std::borrow::Cow<'de, str>> = Vec::new();
            let mut many: std::collections::HashSet<std::borrow::Cow<'de, str>> =
                std::collections::HashSet::new();
            while let Some(key) = map.next_key_seed(Key)? {
                let repeated = if many.is_empty() && few.len() < 16 {
                    let repeated = few.contains(&key);
                    few.push(key.clone());
                    repeated
                } else {
                    many.extend(few.drain(..));
                    !many.insert(key.clone())
                };
                if repeated {
                    return Err(serde::de::Error::custom(format_args!(
                        "key `{key}` given twice in one object"
                    )));
                }
                map.next_value_seed(Checked)?;
            }
            Ok(())
        }
    }

    fn reference(json: &str) -> bool {
        serde::de::DeserializeSeed::deserialize(
            Checked,
            &mut serde_json::Deserializer::from_str(json),
        )
        .is_ok()
    }

    /// How deep containers nest in `json` (JSON text), the outermost counting one.
    fn depth(json: &str) -> usize {
        let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
        for byte in json.bytes() {
            match (in_string, escaped, byte) {
                (true, true, _) => escaped = false,
                (true, false, b'\\') => escaped = true,
                (true, false, b'"') | (false, _, b'"') => in_string = !in_string,
                (false, _, b'[' | b'{') => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        deepest
    }

    /// The check must accept exactly what the reference accepts within [`super::MAX_DEPTH`],
    /// and nothing deeper.
    fn agree(json: &str) -> bool {
        let ours = check(json);
        assert_eq!(
            ours.is_ok(),
            reference(json) && depth(json) <= super::MAX_DEPTH,
            "check and the reference disagree on {:?} ({} bytes; check: {ours:?})",
            json.chars().take(120).collect::<String>(),
            json.len()
        );
        ours.is_ok()
    }

    #[test]
    fn lone_surrogates_are_refused_and_pairs_kept() {
        assert!(agree(r#"{"a":"\ud83d\ude00 \u00e9 \n"}"#));
        for bad in [
            r#"["\ud83d"]"#,
            r#"["\ude00"]"#,
            r#"["\udfff"]"#,
            r#"["\udbff"]"#,
            r#"["\ud83d\u0041"]"#,
            r#"["\ud83d\n"]"#,
            r#"["\ud83dx\ude00"]"#,
            r#"["\ud83d\ud83d\ude00"]"#,
            r#"{"\udc00":1}"#,
        ] {
            assert!(!agree(bad), "{bad}");
        }
        let error = check(r#"["ok","\ude00"]"#).unwrap_err().to_string();
        assert_eq!(error, "a lone surrogate escape at byte 7");
    }

    #[test]
    fn numbers_out_of_range_are_refused() {
        let long = "9".repeat(400);
        let long_fraction = format!("0.{long}");
        for good in [
            "0",
            "-0",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "1e-400",
            "-1e-99999999999999999999",
            "0e99999999999999999999",
            "0.0e+99999999999999999999",
            "18446744073709551616",
            "-9223372036854775809",
            long_fraction.as_str(),
        ] {
            assert!(agree(&format!("[{good}]")), "{good}");
        }
        // Integers past 1e308 without an exponent: an f64 infinity, refused.
        let past = format!("1{}", "0".repeat(309));
        let far_past = format!("-{}", "9".repeat(350));
        for bad in [
            "1e309",
            "-1e400",
            "1.7976931348623159e308",
            "1E+999",
            long.as_str(),
            past.as_str(),
            far_past.as_str(),
        ] {
            assert!(!agree(&format!("[{bad}]")), "{bad}");
        }
        // An exponent past 65535 offset by a long mantissa: finite for one reading, infinite
        // for the other unless the exponent is read whole.
        let infinite = format!("[0.{}1e655360]", "0".repeat(65227));
        assert!(!agree(&infinite));
        let zero = format!("[1{}e-655360]", "0".repeat(65845));
        assert!(agree(&zero));
        let error = check("[1,1e400]").unwrap_err().to_string();
        assert_eq!(error, "a number out of range at byte 3");
    }

    #[test]
    fn nesting_stops_where_a_document_holding_the_value_still_reads() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(agree(&nested(100)));
        assert!(!agree(&nested(101)));
        assert!(!agree(&nested(128)));
        let objects = |depth: usize| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        assert!(agree(&objects(100)));
        assert!(!agree(&objects(101)));
        assert_eq!(
            check(&nested(200)).unwrap_err().to_string(),
            "nesting deeper than 100 at byte 100"
        );
        // At the limit, the value still reads back six containers down (a citation in a
        // request body).
        let wrapped = format!("{}{}{}", "[".repeat(6), objects(100), "]".repeat(6));
        assert!(serde_json::from_str::<serde_json::Value>(&wrapped).is_ok());
    }

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth_and_in_any_spelling() {
        assert!(agree(r#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#));
        for bad in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"x":[{"type":"text","type":"web_search_tool_result"}]}"#,
        ] {
            assert!(!agree(bad), "{bad}");
        }
        let many: Vec<String> = (0..40).map(|key| format!(r#""k{key}":{key}"#)).collect();
        assert!(agree(&format!("{{{}}}", many.join(","))));
        let repeated = format!(r#"{{{},"\u006b3":0}}"#, many.join(","));
        assert!(!agree(&repeated));
        // The key that makes the object large enough for a set repeats one of the first.
        let seventeenth = format!(r#"{{{},"k0":0}}"#, many[..16].join(","));
        assert!(!agree(&seventeenth));
        let seventeenth_distinct = format!(r#"{{{},"k99":0}}"#, many[..16].join(","));
        assert!(agree(&seventeenth_distinct));
        assert_eq!(
            check(r#"{"a":1, "a":2}"#).unwrap_err().to_string(),
            "key `a` given twice in one object at byte 8"
        );
    }

    #[test]
    fn text_that_is_not_json_is_an_error_not_a_panic() {
        for text in [
            "",
            "\"",
            "[\"\\",
            "[tru]",
            "[nul",
            "{\"a\":x}",
            "[1e",
            "[\"\\u12\"]",
        ] {
            let _ = check(text);
        }
        assert!(check("[tru]").is_err());
        assert!(check("x").is_err());
    }

    /// Pieces of JSON text, chosen to reach every rule: escapes of both surrogate halves,
    /// numbers at the edge of `f64`, keys in two spellings.
    fn string() -> impl Strategy<Value = String> {
        let piece = prop::sample::select(vec![
            "a",
            "é",
            "\\n",
            "\\\"",
            "\\\\",
            "\\u0061",
            "\\ud83d\\ude00",
            "\\ud83d",
            "\\ude00",
            "\\uD83D\\uDE00",
            "\\ud83d\\u0041",
            "\\ud83d\\n",
            "\\udbff\\udfff",
            " ",
        ]);
        prop::collection::vec(piece, 0..4).prop_map(|pieces| format!("\"{}\"", pieces.concat()))
    }

    fn number() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "0",
            "-0",
            "12",
            "2.5",
            "-1.5e-3",
            "1E+2",
            "1e308",
            "1e309",
            "-1e400",
            "1e-400",
            "1.7976931348623157e308",
            "1.7976931348623159e308",
            "0e99999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
        ])
        .prop_map(str::to_owned)
    }

    /// Keys in two spellings (a duplicate may hide behind an escape), and enough distinct
    /// ones for objects past [`super::FEW_KEYS`].
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "\"a\"",
                "\"\\u0061\"",
                "\"type\"",
                "\"\\u0074ype\"",
                "\"\\ud83d\"",
            ])
            .prop_map(str::to_owned),
            (0..64u8).prop_map(|key| format!("\"k{key}\"")),
            (0..64u8).prop_map(|key| format!("\"\\u006b{key}\"")),
        ]
    }

    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            string(),
            number(),
            prop::sample::select(vec!["true", "false", "null"]).prop_map(str::to_owned),
        ];
        leaf.prop_recursive(5, 64, 24, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6)
                    .prop_map(|items| format!("[{}]", items.join(" , "))),
                prop::collection::vec((key(), inner), 0..40).prop_map(|fields| {
                    let fields: Vec<String> = fields
                        .into_iter()
                        .map(|(key, value)| format!("{key}:{value}"))
                        .collect();
                    format!("{{{}}}", fields.join(","))
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// On any JSON text (as a `RawValue` accepts it: the grammar checked, the four rules
        /// not), the check accepts exactly what the reference accepts.
        #[test]
        fn check_agrees_with_the_reference(
            inner in value(),
            depth in 0usize..140,
            wrap in prop::sample::select(vec!["[", "{\"a\":"]),
        ) {
            let close = if wrap == "[" { "]" } else { "}" };
            let json = format!("{}{inner}{}", wrap.repeat(depth), close.repeat(depth));
            prop_assume!(serde_json::from_str::<Box<RawValue>>(&json).is_ok());
            agree(&json);
        }
    }
}
