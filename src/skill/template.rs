//! Command templates (`docs/design.md` §2): split into words once,
//! at load time, with POSIX shell quoting; rendered per call into an argv
//! without ever passing through a shell.

use serde_json::{Map, Value};

/// A piece of one template word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Literal(String),
    /// `{{name}}`: the value.
    Var(String),
    /// `{{name:literal}}`: `literal` when the boolean is true, else nothing.
    Flag {
        name: String,
        literal: String,
    },
}

/// One word of the template: one argv element (or none, or several for a
/// standalone array).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub pieces: Vec<Piece>,
}

/// The word as the template writes it (`--range={{from}}..{{to}}`).
impl std::fmt::Display for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for piece in &self.pieces {
            match piece {
                Piece::Literal(s) => f.write_str(s)?,
                Piece::Var(name) => write!(f, "{{{{{name}}}}}")?,
                Piece::Flag { name, literal } => write!(f, "{{{{{name}:{literal}}}}}")?,
            }
        }
        Ok(())
    }
}

impl Word {
    /// The parameter name when the word is exactly one `{{name}}`.
    pub fn standalone_var(&self) -> Option<&str> {
        match self.pieces.as_slice() {
            [Piece::Var(name)] => Some(name),
            _ => None,
        }
    }

    fn literal(&self) -> Option<&str> {
        match self.pieces.as_slice() {
            [Piece::Literal(s)] => Some(s),
            [] => Some(""),
            _ => None,
        }
    }
}

/// A parsed command template: a literal program and argument words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandTemplate {
    /// The first word, which may not contain placeholders.
    pub program: String,
    pub args: Vec<Word>,
    /// Index in `args` of the first literal `--`; standalone values after
    /// it may begin with `-`.
    end_of_options: Option<usize>,
}

/// Why a template could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    /// Unbalanced quotes or a trailing backslash.
    Quoting,
    Empty,
    /// The program word holds a placeholder.
    PlaceholderProgram,
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TemplateError::Quoting => "the command has unbalanced quotes or a trailing backslash",
            TemplateError::Empty => "the command block is empty",
            TemplateError::PlaceholderProgram => "the program (first word) may not contain a {{placeholder}}",
        })
    }
}

impl CommandTemplate {
    /// Splits `src` with shell quoting rules and finds the placeholders.
    /// Lines starting with `#` are comments; `\`-newline joins lines.
    pub fn parse(src: &str) -> Result<Self, TemplateError> {
        let words = shlex::split(&join_continued_lines(src)).ok_or(TemplateError::Quoting)?;
        let mut words = words.iter().map(|w| Word { pieces: pieces(w) });
        let program = words.next().ok_or(TemplateError::Empty)?;
        let program = program
            .literal()
            .ok_or(TemplateError::PlaceholderProgram)?
            .to_owned();
        if program.is_empty() {
            return Err(TemplateError::Empty);
        }
        let args: Vec<Word> = words.collect();
        let end_of_options = args.iter().position(|w| w.literal() == Some("--"));
        Ok(Self {
            program,
            args,
            end_of_options,
        })
    }

    /// Every parameter name the template refers to, in order of appearance.
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.args.iter().flat_map(|w| {
            w.pieces.iter().filter_map(|p| match p {
                Piece::Literal(_) => None,
                Piece::Var(n) | Piece::Flag { name: n, .. } => Some(n.as_str()),
            })
        })
    }

    /// Renders the argument words for validated `args` (defaults applied).
    /// Returns the arguments after the program.
    pub fn render(&self, args: &Map<String, Value>) -> Result<Vec<String>, RenderError> {
        let mut out = Vec::with_capacity(self.args.len());
        for (i, word) in self.args.iter().enumerate() {
            let guarded = self.end_of_options.is_none_or(|eoo| i < eoo);
            if let Some(name) = word.standalone_var() {
                match present(args, name) {
                    None => {}
                    Some(Value::Array(items)) => {
                        for item in items {
                            out.push(standalone(name, item, guarded)?);
                        }
                    }
                    Some(value) => out.push(standalone(name, value, guarded)?),
                }
                continue;
            }
            if let Some(rendered) = embedded_word(word, args, guarded)? {
                out.push(rendered);
            }
        }
        Ok(out)
    }
}

/// Renders a word that is not one standalone placeholder: `None` when it
/// drops out. The rule for a missing (optional) value (`docs/skills.md`,
/// "Placeholders"):
///
/// - in a URL's query, the `name=value` pair that holds it goes, with its
///   `&` (and the `?` when no pair is left);
/// - otherwise a word that carries no value at all drops out
///   (`--limit={{limit}}`, `{{name}}.txt`, flags that are all false);
/// - a word that carries a value given, or a URL, is never dropped: the
///   call is refused ([`RenderError::MissingInWord`]), naming the value.
///
/// Two guards apply to the values spliced in. A value that starts the word
/// may not start with `-` before any `--` (it would read as an option,
/// `{{v}}.txt` with `--output=x`). In a URL word (one that begins with
/// `scheme://`) each value is percent-encoded for the component it sits in,
/// so no value can add a path segment, a query parameter or a fragment.
fn embedded_word(
    word: &Word,
    args: &Map<String, Value>,
    guarded: bool,
) -> Result<Option<String>, RenderError> {
    let mut out = Rendering::new(Url::of(word));
    let mut only_flags = word.pieces.iter().any(|p| matches!(p, Piece::Flag { .. }));
    for piece in &word.pieces {
        match piece {
            Piece::Literal(s) => {
                only_flags = false;
                out.literal(s);
            }
            Piece::Flag { name, literal } => {
                if matches!(present(args, name), Some(Value::Bool(true))) {
                    out.value(literal);
                }
            }
            Piece::Var(name) => {
                only_flags = false;
                let Some(value) = present(args, name) else {
                    out.missing(name);
                    continue;
                };
                if guarded && out.is_empty() && starts_with_dash(value) {
                    return Err(RenderError::ArgumentInjection {
                        param: name.to_owned(),
                    });
                }
                let text = embedded(name, value)?;
                match out.url {
                    Some(url) => out.value(&url.encode(&text)),
                    None => out.value(&text),
                }
            }
        }
    }
    let url = out.url.is_some();
    let (text, unresolved, given) = out.finish();
    if let Some(param) = unresolved {
        if given || url {
            return Err(RenderError::MissingInWord {
                param,
                word: word.to_string(),
            });
        }
        return Ok(None);
    }
    Ok((!(only_flags && text.is_empty())).then_some(text))
}

/// A word being rendered, kept in the parts a missing value can take
/// away: a URL's query pairs apart from the rest.
struct Rendering {
    /// Where in a URL the text goes on; `None` for a word that is not one.
    url: Option<Url>,
    /// Everything up to the query's `?`, or the whole of another word.
    head: String,
    /// The query's pairs, split at its literal `&`s.
    pairs: Vec<Pair>,
    /// From the fragment's `#` on.
    tail: String,
    /// The first missing value outside the query's pairs.
    missing: Option<String>,
    /// Whether a value given (or a flag that is on) went into the head or
    /// the tail.
    given: bool,
}

/// One `name=value` pair of a URL's query.
#[derive(Default)]
struct Pair {
    text: String,
    missing: Option<String>,
    given: bool,
}

impl Rendering {
    fn new(url: Option<Url>) -> Self {
        Self {
            url,
            head: String::new(),
            pairs: Vec::new(),
            tail: String::new(),
            missing: None,
            given: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.head.is_empty() && self.pairs.is_empty() && self.tail.is_empty()
    }

    /// Template text: it moves a URL from one component to the next.
    fn literal(&mut self, s: &str) {
        let Some(mut state) = self.url else {
            self.head.push_str(s);
            return;
        };
        let mut rest = s;
        if state == Url::Scheme {
            let Some((scheme, after)) = s.split_once("://") else {
                self.head.push_str(s);
                return;
            };
            self.head.push_str(scheme);
            self.head.push_str("://");
            state = Url::Authority;
            rest = after;
        }
        for c in rest.chars() {
            let next = state.step(c);
            match (state, next) {
                (Url::Query, Url::Query) if c == '&' => self.pairs.push(Pair::default()),
                (Url::Query, Url::Query) => self.pair().text.push(c),
                (_, Url::Query) => {
                    self.head.push(c);
                    self.pairs.push(Pair::default());
                }
                (_, Url::Fragment) => self.tail.push(c),
                _ => self.head.push(c),
            }
            state = next;
        }
        self.url = Some(state);
    }

    /// A value (already encoded), or the literal of a flag that is on.
    fn value(&mut self, text: &str) {
        match self.url {
            Some(Url::Query) => {
                let pair = self.pair();
                pair.text.push_str(text);
                pair.given = true;
            }
            Some(Url::Fragment) => {
                self.tail.push_str(text);
                self.given = true;
            }
            _ => {
                self.head.push_str(text);
                self.given = true;
            }
        }
    }

    fn missing(&mut self, name: &str) {
        if self.url == Some(Url::Query) {
            let pair = self.pair();
            pair.missing.get_or_insert_with(|| name.to_owned());
        } else {
            self.missing.get_or_insert_with(|| name.to_owned());
        }
    }

    /// The pair being written (there is one from the query's `?` on).
    fn pair(&mut self) -> &mut Pair {
        if self.pairs.is_empty() {
            self.pairs.push(Pair::default());
        }
        let last = self.pairs.len() - 1;
        &mut self.pairs[last]
    }

    /// The word's text without the pairs that lost their value; the first
    /// missing value nothing could take away; whether any value was given.
    fn finish(self) -> (String, Option<String>, bool) {
        let mut given = self.given;
        let mut unresolved = self.missing;
        let mut kept: Vec<String> = Vec::new();
        let mut dropped = false;
        for pair in self.pairs {
            given |= pair.given;
            match pair.missing {
                // A pair with a value given as well cannot go whole.
                Some(name) if pair.given => {
                    unresolved.get_or_insert(name);
                }
                Some(_) => dropped = true,
                None => kept.push(pair.text),
            }
        }
        let mut text = self.head;
        if dropped && kept.is_empty() && text.ends_with('?') {
            text.pop();
        }
        text.push_str(&kept.join("&"));
        text.push_str(&self.tail);
        (text, unresolved, given)
    }
}

/// Whether a value would read as an option where it starts a word (numbers
/// are exempt: `-5` is a value).
fn starts_with_dash(value: &Value) -> bool {
    match value {
        Value::String(s) => s.starts_with('-'),
        Value::Array(items) => items.first().is_some_and(starts_with_dash),
        _ => false,
    }
}

/// Where in a URL the next value lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Url {
    /// Before the `://` of the word's first literal.
    Scheme,
    Authority,
    Path,
    Query,
    Fragment,
}

/// What a URL value keeps as it is: RFC 3986's unreserved characters.
/// Everything else, `/ ? # & = + %` and spaces included, is encoded, so a
/// value stays inside its path segment, query value or fragment.
const URL_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl Url {
    /// The component at the start of a word that begins with
    /// `scheme://`; `None` for any other word.
    fn of(word: &Word) -> Option<Self> {
        let Some(Piece::Literal(first)) = word.pieces.first() else {
            return None;
        };
        let (scheme, _) = first.split_once("://")?;
        let mut chars = scheme.chars();
        let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        valid.then_some(Url::Scheme)
    }

    /// The component after one more character of the template's text
    /// (past the scheme's `://`).
    fn step(self, c: char) -> Self {
        match (self, c) {
            (Url::Fragment, _) | (_, '#') => Url::Fragment,
            (Url::Query, _) | (_, '?') => Url::Query,
            (Url::Authority, '/') => Url::Path,
            (state, _) => state,
        }
    }

    /// A value encoded for this component. A whole path segment of dots
    /// is encoded too, so that `..` cannot climb out of its place.
    fn encode(self, value: &str) -> String {
        if self == Url::Path && !value.is_empty() && value.bytes().all(|b| b == b'.') {
            return "%2E".repeat(value.len());
        }
        percent_encoding::utf8_percent_encode(value, URL_VALUE).to_string()
    }
}

/// Removes each `\`-newline outside single quotes, as a POSIX shell does
/// before splitting words. (shlex keeps a word boundary there, so an
/// indented continuation line would add an empty word.)
fn join_continued_lines(src: &str) -> std::borrow::Cow<'_, str> {
    if !src.contains("\\\n") {
        return std::borrow::Cow::Borrowed(src);
    }
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    let (mut single, mut double) = (false, false);
    // Whether the next character starts a word (where `#` opens a comment).
    let mut word_start = true;
    while let Some(c) = chars.next() {
        match c {
            // A comment runs to the end of its line, quotes and all.
            '#' if word_start && !single && !double => {
                out.push(c);
                for c in chars.by_ref() {
                    out.push(c);
                    if c == '\n' {
                        break;
                    }
                }
                word_start = true;
                continue;
            }
            '\'' if !double => {
                single = !single;
                out.push(c);
            }
            '"' if !single => {
                double = !double;
                out.push(c);
            }
            '\\' if !single => match chars.peek() {
                Some('\n') => {
                    chars.next();
                }
                Some(&next) => {
                    out.push(c);
                    out.push(next);
                    chars.next();
                }
                None => out.push(c),
            },
            _ => out.push(c),
        }
        word_start = !single && !double && c.is_whitespace();
    }
    std::borrow::Cow::Owned(out)
}

/// Why a call's arguments cannot be rendered into an argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// A value holds a NUL byte, which no argv element can carry.
    Nul { param: String },
    /// A standalone value starts with `-` before any `--`.
    ArgumentInjection { param: String },
    /// An optional value is missing from a word that cannot go without
    /// it: one that carries another value, or a URL.
    MissingInWord { param: String, word: String },
}

fn present<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    args.get(name).filter(|v| !v.is_null())
}

fn scalar(name: &str, value: &Value) -> Result<String, RenderError> {
    let s = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    if s.contains('\0') {
        return Err(RenderError::Nul {
            param: name.to_owned(),
        });
    }
    Ok(s)
}

fn standalone(name: &str, value: &Value, guarded: bool) -> Result<String, RenderError> {
    let s = scalar(name, value)?;
    if guarded && !value.is_number() && s.starts_with('-') {
        return Err(RenderError::ArgumentInjection {
            param: name.to_owned(),
        });
    }
    Ok(s)
}

fn embedded(name: &str, value: &Value) -> Result<String, RenderError> {
    match value {
        Value::Array(items) => {
            let parts = items
                .iter()
                .map(|v| scalar(name, v))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(parts.join(" "))
        }
        other => scalar(name, other),
    }
}

/// Cuts a word into literal text and `{{…}}` placeholders. Braces that do
/// not hold a valid placeholder (`{{.State}}`, `{{ }}`) stay literal text.
fn pieces(word: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut literal = String::new();
    let mut rest = word;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        match placeholder(&after[..close]) {
            Some(piece) => {
                literal.push_str(&rest[..open]);
                if !literal.is_empty() {
                    out.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                out.push(piece);
                rest = &after[close + 2..];
            }
            None => {
                literal.push_str(&rest[..open + 2]);
                rest = after;
            }
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        out.push(Piece::Literal(literal));
    }
    out
}

fn placeholder(inner: &str) -> Option<Piece> {
    let (name, literal) = match inner.split_once(':') {
        Some((n, l)) => (n.trim(), Some(l)),
        None => (inner.trim(), None),
    };
    if !is_param_name(name) {
        return None;
    }
    Some(match literal {
        None => Piece::Var(name.to_owned()),
        Some(l) => Piece::Flag {
            name: name.to_owned(),
            literal: l.to_owned(),
        },
    })
}

/// Parameter names: an ASCII letter or `_`, then letters, digits, `_`.
pub fn is_param_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 64
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(t: &str, args: Value) -> Result<Vec<String>, RenderError> {
        let Value::Object(map) = args else { panic!() };
        CommandTemplate::parse(t).unwrap().render(&map)
    }

    #[test]
    fn parses_program_and_placeholders() {
        let t = CommandTemplate::parse("git log -n {{count}} --limit={{limit}} {{staged:--staged}}").unwrap();
        assert_eq!(t.program, "git");
        assert_eq!(t.placeholders().collect::<Vec<_>>(), ["count", "limit", "staged"]);
    }

    #[test]
    fn quotes_and_foreign_braces_stay_literal() {
        let t = CommandTemplate::parse(r#"printf '{"value": "%s"}\n' "ratio is {{ratio}}" '{{.State}}'"#)
            .unwrap();
        assert_eq!(t.args[0].pieces, [Piece::Literal(r#"{"value": "%s"}\n"#.into())]);
        assert_eq!(
            t.args[1].pieces,
            [Piece::Literal("ratio is ".into()), Piece::Var("ratio".into())]
        );
        assert_eq!(t.args[2].pieces, [Piece::Literal("{{.State}}".into())]);
    }

    #[test]
    fn continuations_join_lines_but_not_inside_single_quotes() {
        let t = CommandTemplate::parse("echo \"it's\" \\\n   next '\\\n'").unwrap();
        let words: Vec<_> = t.args.iter().map(|w| w.pieces.clone()).collect();
        assert_eq!(
            words,
            [
                vec![Piece::Literal("it's".into())],
                vec![Piece::Literal("next".into())],
                vec![Piece::Literal("\\\n".into())],
            ]
        );
    }

    #[test]
    fn program_must_be_literal() {
        assert_eq!(
            CommandTemplate::parse("{{prog}} x"),
            Err(TemplateError::PlaceholderProgram)
        );
        assert_eq!(CommandTemplate::parse("   "), Err(TemplateError::Empty));
        assert_eq!(
            CommandTemplate::parse("echo 'unclosed"),
            Err(TemplateError::Quoting)
        );
    }

    #[test]
    fn renders_every_form() {
        let argv = render(
            "printf '%s\\n' {{text}} {{words}} {{loud:--loud}} --times={{times}} \"ratio is {{ratio}}\"",
            json!({"text": "a b; $(id)", "words": ["x", "y z"], "loud": true, "times": 2}),
        )
        .unwrap();
        assert_eq!(argv, ["%s\\n", "a b; $(id)", "x", "y z", "--loud", "--times=2"]);
    }

    #[test]
    fn absent_optionals_drop_their_words() {
        let argv = render("git diff {{staged:--staged}} --x={{x}} {{y}}", json!({})).unwrap();
        assert_eq!(argv, ["diff"]);
    }

    #[test]
    fn injection_guard_and_nul() {
        assert_eq!(
            render("rm {{path}}", json!({"path": "-rf"})),
            Err(RenderError::ArgumentInjection { param: "path".into() })
        );
        assert_eq!(
            render("rm -- {{path}}", json!({"path": "-rf"})).unwrap(),
            ["--", "-rf"]
        );
        assert_eq!(render("sleep {{n}}", json!({"n": -1})).unwrap(), ["-1"]);
        assert_eq!(render("echo --x={{v}}", json!({"v": "-y"})).unwrap(), ["--x=-y"]);
        assert_eq!(
            render("echo {{v}}", json!({"v": "a\u{0}b"})),
            Err(RenderError::Nul { param: "v".into() })
        );
    }

    #[test]
    fn the_guard_covers_every_word_a_value_begins() {
        let refused = |t: &str, v: Value| {
            assert_eq!(
                render(t, v),
                Err(RenderError::ArgumentInjection { param: "v".into() }),
                "{t}"
            );
        };
        refused("echo {{v}}.txt", json!({"v": "--output=/tmp/pwn"}));
        refused("echo {{v}}{{w}}", json!({"v": "-", "w": "rf"}));
        refused("echo {{v}}.txt", json!({"v": ["-x", "y"]}));
        // A flag that renders nothing leaves the value at the start.
        refused("echo {{t:--t}}{{v}}", json!({"t": false, "v": "-x"}));
        assert_eq!(
            render("echo {{t:--t}}{{v}}", json!({"t": true, "v": "-x"})).unwrap(),
            ["--t-x"]
        );
        assert_eq!(
            render("echo -- {{v}}.txt", json!({"v": "--output=x"})).unwrap(),
            ["--", "--output=x.txt"]
        );
        assert_eq!(render("echo {{v}}.txt", json!({"v": -5})).unwrap(), ["-5.txt"]);
        assert_eq!(render("echo a{{v}}", json!({"v": "-x"})).unwrap(), ["a-x"]);
    }

    #[test]
    fn a_missing_value_in_a_query_takes_its_pair_away() {
        let seed = r#"curl "https://api.com/search?q={{query}}&n={{limit}}""#;
        assert_eq!(
            render(seed, json!({"query": "rust lang"})).unwrap(),
            ["https://api.com/search?q=rust%20lang"]
        );
        assert_eq!(
            render("curl https://h/s?a={{a}}&b=2&c={{c}}#top", json!({"c": 3})).unwrap(),
            ["https://h/s?b=2&c=3#top"]
        );
        assert_eq!(
            render("curl https://h/s?n={{n}}", json!({})).unwrap(),
            ["https://h/s"]
        );
        assert_eq!(
            render("curl https://h/s?&n={{n}}&", json!({})).unwrap(),
            ["https://h/s?&"]
        );
    }

    #[test]
    fn a_word_that_carries_a_value_is_never_dropped() {
        let missing = |t: &str, v: Value, param: &str, word: &str| {
            assert_eq!(
                render(t, v),
                Err(RenderError::MissingInWord {
                    param: param.into(),
                    word: word.into()
                }),
                "{t}"
            );
        };
        missing(
            "git log --range={{from}}..{{to}}",
            json!({"from": "a"}),
            "to",
            "--range={{from}}..{{to}}",
        );
        // A URL is never dropped; outside the query no rule mends it.
        missing("curl https://h/{{p}}/raw", json!({}), "p", "https://h/{{p}}/raw");
        missing("curl https://h/x#{{f}}", json!({}), "f", "https://h/x#{{f}}");
        // A pair holding a value given and a missing one.
        missing(
            "curl https://h/?r={{from}}-{{to}}",
            json!({"from": 1}),
            "to",
            "https://h/?r={{from}}-{{to}}",
        );
        // A flag that is on is a value too.
        missing(
            "echo {{v:-v}}{{level}}",
            json!({"v": true}),
            "level",
            "{{v:-v}}{{level}}",
        );
        // A word with no value at all still drops out.
        assert_eq!(
            render("echo --limit={{limit}} {{a}}.{{b}} x", json!({})).unwrap(),
            ["x"]
        );
    }

    #[test]
    fn values_in_urls_are_encoded_for_their_component() {
        assert_eq!(
            render(
                r#"curl "https://api.com/search?q={{query}}&n={{limit}}""#,
                json!({"query": "rust lang", "limit": 5})
            )
            .unwrap(),
            ["https://api.com/search?q=rust%20lang&n=5"]
        );
        assert_eq!(
            render("curl https://api.com/search?q={{q}}&n=5", json!({"q": "a&x=1#f"})).unwrap(),
            ["https://api.com/search?q=a%26x%3D1%23f&n=5"]
        );
        assert_eq!(
            render("curl https://h/{{p}}/raw", json!({"p": "a/b?c"})).unwrap(),
            ["https://h/a%2Fb%3Fc/raw"]
        );
        assert_eq!(
            render("curl https://h/{{p}}/raw", json!({"p": ".."})).unwrap(),
            ["https://h/%2E%2E/raw"]
        );
        assert_eq!(
            render("curl https://h/x#{{f}}", json!({"f": "a b#c"})).unwrap(),
            ["https://h/x#a%20b%23c"]
        );
        assert_eq!(
            render("curl https://{{host}}/x", json!({"host": "evil.com@good.com"})).unwrap(),
            ["https://evil.com%40good.com/x"]
        );
        // Not a URL: no scheme, or not at the start of the word.
        assert_eq!(
            render("echo q={{v}}&n=1", json!({"v": "a b&c"})).unwrap(),
            ["q=a b&c&n=1"]
        );
        assert_eq!(
            render("echo x:https://h/{{v}}", json!({"v": "a/b"})).unwrap(),
            ["x:https://h/a/b"]
        );
    }
}
