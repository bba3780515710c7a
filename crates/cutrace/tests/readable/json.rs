//! JSON as a golden shows it: object keys sorted, one top-level member per line and one array item
//! per line, every number, string and literal kept exactly as written (no float is parsed and
//! printed again, so what the golden shows is what the file holds).

/// A JSON value with its scalars as their source text.
enum Json {
    Object(Vec<(String, Json)>),
    Array(Vec<Json>),
    /// A string (quotes and escapes included), a number, `true`, `false` or `null`.
    Scalar(String),
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.s.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > 200 {
            return Err("nested more than 200 deep".into());
        }
        self.skip_space();
        match self.s.get(self.at) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Json::Scalar),
            Some(_) => {
                let start = self.at;
                while self
                    .s
                    .get(self.at)
                    .is_some_and(|c| !b",]}".contains(c) && !c.is_ascii_whitespace())
                {
                    self.at += 1;
                }
                Ok(Json::Scalar(self.text(start)))
            }
            None => Err("unexpected end".into()),
        }
    }

    fn text(&self, start: usize) -> String {
        String::from_utf8_lossy(&self.s[start..self.at]).into_owned()
    }

    fn string(&mut self) -> Result<String, String> {
        let start = self.at;
        self.at += 1;
        loop {
            match self.s.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(self.text(start));
                }
                Some(b'\\') => self.at += 2,
                Some(_) => self.at += 1,
                None => return Err(format!("string from byte {start} not closed")),
            }
        }
    }

    /// Expects `c` after optional whitespace.
    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.skip_space();
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", c as char, self.at))
        }
    }

    /// After an item: true at the closing `close`, false at a `,`.
    fn ends(&mut self, close: u8) -> Result<bool, String> {
        self.skip_space();
        match self.s.get(self.at) {
            Some(&c) if c == close => {
                self.at += 1;
                Ok(true)
            }
            Some(b',') => {
                self.at += 1;
                Ok(false)
            }
            _ => Err(format!(
                "expected ',' or {:?} at byte {}",
                close as char, self.at
            )),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, String> {
        self.at += 1;
        let mut members = Vec::new();
        self.skip_space();
        if self.s.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_space();
            let key = self.string()?;
            self.expect(b':')?;
            members.push((key, self.value(depth + 1)?));
            if self.ends(b'}')? {
                break;
            }
        }
        members.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Json::Object(members))
    }

    fn array(&mut self, depth: usize) -> Result<Json, String> {
        self.at += 1;
        let mut items = Vec::new();
        self.skip_space();
        if self.s.get(self.at) == Some(&b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            if self.ends(b']')? {
                break;
            }
        }
        Ok(Json::Array(items))
    }
}

fn compact(v: &Json, out: &mut String) {
    match v {
        Json::Scalar(s) => out.push_str(s),
        Json::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                compact(x, out);
            }
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            for (i, (k, x)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(k);
                out.push(':');
                compact(x, out);
            }
            out.push('}');
        }
    }
}

/// The scalar text of `key` in an object (`"X"` for `"ph":"X"`), if it has one.
fn scalar<'a>(v: &'a Json, key: &str) -> Option<&'a str> {
    let Json::Object(members) = v else {
        return None;
    };
    members.iter().find_map(|(k, x)| match x {
        Json::Scalar(s) if k.trim_matches('"') == key => Some(s.as_str()),
        _ => None,
    })
}

/// An array's items, one a line: when they have a `ph` (a Chrome trace's events), first a line
/// that counts them by `ph` and `cat`, then the first `per_kind` of each such kind in file
/// order; otherwise the first items. At most `max` items are shown.
fn array_lines(items: &[Json], indent: &str, per_kind: usize, max: usize, out: &mut Vec<String>) {
    let kind = |x: &Json| {
        scalar(x, "ph").map(|ph| format!("ph {ph} cat {}", scalar(x, "cat").unwrap_or("-")))
    };
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for k in items.iter().filter_map(kind) {
        *kinds.entry(k).or_default() += 1;
    }
    if !kinds.is_empty() {
        let by: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        out.push(format!(
            "{indent}({} items; {})",
            items.len(),
            by.join(", ")
        ));
    }
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut shown = 0;
    for x in items {
        if shown == max {
            break;
        }
        if let Some(k) = kind(x) {
            let n = seen.entry(k).or_default();
            if *n == per_kind {
                continue;
            }
            *n += 1;
        }
        let mut line = indent.to_string();
        compact(x, &mut line);
        out.push(line);
        shown += 1;
    }
    if items.len() > shown {
        out.push(format!(
            "{indent}… {} more, covered by the CRC-32 above",
            items.len() - shown
        ));
    }
}

/// `bytes` as lines: keys sorted, each top-level member on a line of its own (an array member
/// with one item a line, as [`array_lines`] picks them), scalars verbatim.
pub fn lines(bytes: &[u8], per_kind: usize, max_items: usize) -> Vec<String> {
    let mut p = Parser { s: bytes, at: 0 };
    let v = match p.value(0) {
        Ok(v) => v,
        Err(e) => return vec![format!("(not JSON: {e})")],
    };
    p.skip_space();
    let mut out = Vec::new();
    match &v {
        Json::Object(members) => {
            out.push("{".to_string());
            for (k, x) in members {
                match x {
                    Json::Array(items) if !items.is_empty() => {
                        out.push(format!("  {k}: ["));
                        array_lines(items, "    ", per_kind, max_items, &mut out);
                        out.push("  ]".to_string());
                    }
                    _ => {
                        let mut line = format!("  {k}: ");
                        compact(x, &mut line);
                        out.push(line);
                    }
                }
            }
            out.push("}".to_string());
        }
        Json::Array(items) => {
            out.push("[".to_string());
            array_lines(items, "  ", per_kind, max_items, &mut out);
            out.push("]".to_string());
        }
        Json::Scalar(s) => out.push(s.clone()),
    }
    if p.at < bytes.len() {
        out.push(format!(
            "(and {} bytes after the JSON value)",
            bytes.len() - p.at
        ));
    }
    out
}

#[test]
fn json_lines_sort_keys_and_keep_numbers_as_written() {
    let got = lines(
        br#"{"b": [ {"ph":"X","ts":5153875767895.669}, {"ph":"X"}, {"ph":"M"}, 3, 4 ], "a": {"z":1e3,"y":"q\"x"}}"#,
        1,
        3,
    );
    assert_eq!(
        got,
        [
            "{",
            r#"  "a": {"y":"q\"x","z":1e3}"#,
            r#"  "b": ["#,
            "    (5 items; ph \"M\" cat -: 1, ph \"X\" cat -: 2)",
            r#"    {"ph":"X","ts":5153875767895.669}"#,
            r#"    {"ph":"M"}"#,
            "    3",
            "    … 2 more, covered by the CRC-32 above",
            "  ]",
            "}",
        ]
    );
}
