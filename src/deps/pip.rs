//! `requirements.txt` as pip reads it, held to what PEP 508 calls a
//! name-based requirement: a package name, optional `[extras]`, optional
//! version specifiers (`==1.2`, `>=1,<2`, `~=1.4`, `!=1.3`) and an
//! optional `;` environment marker. Comments and blank lines are fine.
//!
//! The grammar accepts only ASCII letters, digits, the specifier and
//! marker operators, and spaces or tabs between them. Wherever pip could
//! read a line otherwise (an option after a space, a continuation, a
//! `${VAR}`, a line break Python sees and Rust does not), the line holds a
//! character this grammar refuses.

use super::{REQUIREMENTS, Refusal};

/// Parentheses a marker may nest.
const MAX_NESTING: usize = 16;

/// The environment marker variables of PEP 508, and the dotted legacy
/// spellings `packaging` still reads.
const MARKER_VARIABLES: [&str; 18] = [
    "python_version",
    "python_full_version",
    "os_name",
    "sys_platform",
    "platform_release",
    "platform_system",
    "platform_version",
    "platform_machine",
    "platform_python_implementation",
    "implementation_name",
    "implementation_version",
    "extra",
    "os.name",
    "sys.platform",
    "platform.version",
    "platform.machine",
    "platform.python_implementation",
    "python_implementation",
];

/// URL schemes and VCS prefixes pip follows.
const SCHEMES: [&str; 9] = [
    "file:", "http:", "https:", "ftp:", "git+", "git:", "hg+", "svn+", "bzr+",
];

/// Every line pip would read as something other than a name-based
/// requirement, a comment or a blank.
pub(super) fn check(text: &str) -> Vec<Refusal> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut refused = Vec::new();
    for (index, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if let Err(why) = check_line(line) {
            let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
            refused.push(Refusal::new(REQUIREMENTS, text, number, why.to_string()));
        }
    }
    refused
}

/// Why a line of `requirements.txt` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum LineError {
    #[error("it ends with `\\`, which joins it to the next line: write one requirement per line")]
    Continued,
    /// An option, a URL, a direct reference or a path ([`hazard`] says).
    #[error("{0}")]
    Hazard(String),
    /// `shown`: the line as a message quotes it.
    #[error(
        "`{shown}` is not a package name with optional [extras], version specifiers and a `;` marker: {why}"
    )]
    NotRequirement { shown: String, why: Syntax },
}

/// Where a requirement leaves PEP 508's name-based grammar. `String`s
/// are what the parser met there, as [`Cursor::unexpected`] words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Syntax {
    #[error("it holds a character outside ASCII")]
    NotAscii,
    #[error("it does not begin with a package name ({0})")]
    NoName(String),
    #[error("an extra is not a name ({0})")]
    BadExtra(String),
    #[error("the extras are not closed ({0})")]
    OpenExtras(String),
    #[error("not a version operator: {0}")]
    NotVersionOp(String),
    #[error("a version is missing ({0})")]
    NoVersion(String),
    #[error("unexpected {0}")]
    Unexpected(String),
    #[error("the marker goes on after its end")]
    MarkerTrails,
    #[error("not a marker operator: {0}")]
    NotMarkerOp(String),
    #[error("a marker string holds {0}")]
    BadMarkerString(String),
    #[error("unexpected {0} in the marker")]
    MarkerUnexpected(String),
    #[error("`{0}` is not a marker variable")]
    NotVariable(String),
    #[error("the marker nests too deep")]
    TooDeep,
    #[error("a comparison lacks its operator")]
    NoOperator,
    /// A token the marker's grammar needs is not there; says which.
    #[error("{0}")]
    Missing(&'static str),
}

fn check_line(line: &str) -> Result<(), LineError> {
    if line.ends_with('\\') {
        return Err(LineError::Continued);
    }
    let body = strip_comment(line).trim_matches([' ', '\t']);
    if body.is_empty() {
        return Ok(());
    }
    if let Some(why) = hazard(body) {
        return Err(LineError::Hazard(why));
    }
    requirement(body).map_err(|why| LineError::NotRequirement {
        shown: shown(body),
        why,
    })
}

/// The line before a `#` that starts it or follows a space or tab.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    let at = (0..bytes.len()).find(|&i| bytes[i] == b'#' && (i == 0 || matches!(bytes[i - 1], b' ' | b'\t')));
    at.map_or(line, |i| &line[..i])
}

/// Why a line that pip would take as an option, a URL, a direct
/// reference or a path is refused; `None` for any other line.
fn hazard(body: &str) -> Option<String> {
    let option = body.split([' ', '\t']).find(|word| word.starts_with('-'));
    if let Some(word) = option {
        let name = option_name(word);
        let place = if body.starts_with('-') {
            ""
        } else {
            " after the requirement"
        };
        return Some(format!(
            "`{name}`{place} is an option: {}; requirement lines may only name packages",
            option_risk(name)
        ));
    }
    let lower = body.to_ascii_lowercase();
    if lower.contains("://") || SCHEMES.iter().any(|s| lower.starts_with(s)) {
        return Some(format!(
            "`{}` is a URL: pip would fetch what it points at, from any host the server reaches, and build it",
            shown(body)
        ));
    }
    if body.contains('@') {
        return Some(format!(
            "`{}` is a direct reference (`name @ url`): only packages of the index, by name and version, are installed",
            shown(body)
        ));
    }
    if body.starts_with(['.', '/', '~']) || body.contains(['/', '\\']) || is_archive_name(&lower) {
        return Some(format!(
            "`{}` is a path: pip would build the code there, running its build backend",
            shown(body)
        ));
    }
    None
}

fn is_archive_name(lower: &str) -> bool {
    [".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

/// `--index-url=x` → `--index-url`, `-rfile` → `-r`.
fn option_name(word: &str) -> &str {
    if word.starts_with("--") {
        word.split('=').next().unwrap_or(word)
    } else {
        word.get(..2).unwrap_or(word)
    }
}

fn option_risk(name: &str) -> &'static str {
    match name {
        "-r" | "--requirement" | "-c" | "--constraint" => {
            "it reads another file, anywhere on the server, into the install"
        }
        "-i" | "--index-url" | "--extra-index-url" | "--no-index" | "-f" | "--find-links"
        | "--trusted-host" => "it points pip at another index or place, on any host the server can reach",
        "-e" | "--editable" => "it builds local or version-control code, running its build backend",
        "--hash" => "hash-checking mode is not supported, pins are by version",
        _ => "pip's options are skilld's to set, not a skill's",
    }
}

/// The text as a message quotes it: at most 80 characters.
fn shown(body: &str) -> String {
    let mut out: String = body.chars().take(80).collect();
    if out.len() < body.len() {
        out.push('…');
    }
    out
}

/// A position in a line being parsed.
struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Self {
        Self {
            s: s.as_bytes(),
            at: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.at += usize::from(hit);
        hit
    }

    fn eat_str(&mut self, s: &str) -> bool {
        let hit = self.s[self.at..].starts_with(s.as_bytes());
        if hit {
            self.at += s.len();
        }
        hit
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
    }

    fn take_while(&mut self, keep: impl Fn(u8) -> bool) -> &'a str {
        let start = self.at;
        while self.peek().is_some_and(&keep) {
            self.at += 1;
        }
        // Only ASCII is ever taken, so the cut is on a char boundary.
        std::str::from_utf8(&self.s[start..self.at]).unwrap_or_default()
    }

    fn unexpected(&self) -> String {
        match self.peek() {
            Some(b) if b.is_ascii_graphic() => format!("`{}` at column {}", b as char, self.at + 1),
            Some(b) => format!("the byte 0x{b:02x} at column {}", self.at + 1),
            None => "the line ends too soon".to_owned(),
        }
    }
}

/// `name [extras] specifiers ; marker`, every part after the name optional.
fn requirement(body: &str) -> Result<(), Syntax> {
    if !body.is_ascii() {
        return Err(Syntax::NotAscii);
    }
    let mut c = Cursor::new(body);
    name(&mut c).map_err(|()| Syntax::NoName(c.unexpected()))?;
    c.skip_ws();
    if c.eat(b'[') {
        extras(&mut c)?;
        c.skip_ws();
    }
    if matches!(c.peek(), Some(b'<' | b'>' | b'=' | b'!' | b'~')) {
        specifiers(&mut c)?;
        c.skip_ws();
    }
    if c.eat(b';') {
        return marker(&body[c.at..]);
    }
    match c.peek() {
        None => Ok(()),
        Some(_) => Err(Syntax::Unexpected(c.unexpected())),
    }
}

/// A name: letters and digits, with `.`, `_` and `-` inside.
fn name(c: &mut Cursor) -> Result<(), ()> {
    let taken = c.take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    let ends = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    if ends(taken.bytes().next()) && ends(taken.bytes().last()) {
        Ok(())
    } else {
        Err(())
    }
}

/// `a, b]`, after the `[`.
fn extras(c: &mut Cursor) -> Result<(), Syntax> {
    c.skip_ws();
    if c.eat(b']') {
        return Ok(());
    }
    loop {
        name(c).map_err(|()| Syntax::BadExtra(c.unexpected()))?;
        c.skip_ws();
        if c.eat(b']') {
            return Ok(());
        }
        if !c.eat(b',') {
            return Err(Syntax::OpenExtras(c.unexpected()));
        }
        c.skip_ws();
    }
}

/// `>=1.0, <2`.
fn specifiers(c: &mut Cursor) -> Result<(), Syntax> {
    loop {
        let op = ["===", "~=", "==", "!=", "<=", ">=", "<", ">"]
            .into_iter()
            .find(|op| c.eat_str(op));
        if op.is_none() {
            return Err(Syntax::NotVersionOp(c.unexpected()));
        }
        c.skip_ws();
        let version = c.take_while(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'!' | b'*' | b'-')
        });
        if !version.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric()) {
            return Err(Syntax::NoVersion(c.unexpected()));
        }
        let before_comma = c.at;
        c.skip_ws();
        if !c.eat(b',') {
            c.at = before_comma;
            return Ok(());
        }
        c.skip_ws();
    }
}

/// One token of an environment marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Value,
    Op,
    In,
    Not,
    And,
    Or,
    Open,
    Close,
}

/// An environment marker: comparisons of marker variables and quoted
/// strings, joined by `and` and `or`, in parentheses as needed.
fn marker(text: &str) -> Result<(), Syntax> {
    let tokens = tokens(text)?;
    let mut at = 0;
    or_expr(&tokens, &mut at, 0)?;
    if at == tokens.len() {
        Ok(())
    } else {
        Err(Syntax::MarkerTrails)
    }
}

fn tokens(text: &str) -> Result<Vec<Token>, Syntax> {
    let mut c = Cursor::new(text);
    let mut out = Vec::new();
    loop {
        c.skip_ws();
        let Some(b) = c.peek() else {
            return Ok(out);
        };
        let token = match b {
            b'(' | b')' => {
                c.at += 1;
                if b == b'(' { Token::Open } else { Token::Close }
            }
            b'\'' | b'"' => quoted(&mut c, b)?,
            b'<' | b'>' | b'=' | b'!' | b'~' => {
                let ops = ["===", "==", "!=", "<=", ">=", "~=", "<", ">"];
                ops.into_iter()
                    .find(|op| c.eat_str(op))
                    .map(|_| Token::Op)
                    .ok_or_else(|| Syntax::NotMarkerOp(c.unexpected()))?
            }
            _ => word(&mut c)?,
        };
        out.push(token);
    }
}

/// A string in `quote`s, of the characters versions and platform names use.
fn quoted(c: &mut Cursor, quote: u8) -> Result<Token, Syntax> {
    c.at += 1;
    c.take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'*' | b'!' | b'-'));
    if c.eat(quote) {
        Ok(Token::Value)
    } else {
        Err(Syntax::BadMarkerString(c.unexpected()))
    }
}

/// A keyword or a marker variable.
fn word(c: &mut Cursor) -> Result<Token, Syntax> {
    let word = c.take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'));
    match word {
        "and" => Ok(Token::And),
        "or" => Ok(Token::Or),
        "in" => Ok(Token::In),
        "not" => Ok(Token::Not),
        "" => Err(Syntax::MarkerUnexpected(c.unexpected())),
        w if MARKER_VARIABLES.contains(&w) => Ok(Token::Value),
        w => Err(Syntax::NotVariable(w.to_owned())),
    }
}

fn or_expr(t: &[Token], at: &mut usize, depth: usize) -> Result<(), Syntax> {
    and_expr(t, at, depth)?;
    while t.get(*at) == Some(&Token::Or) {
        *at += 1;
        and_expr(t, at, depth)?;
    }
    Ok(())
}

fn and_expr(t: &[Token], at: &mut usize, depth: usize) -> Result<(), Syntax> {
    atom(t, at, depth)?;
    while t.get(*at) == Some(&Token::And) {
        *at += 1;
        atom(t, at, depth)?;
    }
    Ok(())
}

/// `( expr )` or `value op value`.
fn atom(t: &[Token], at: &mut usize, depth: usize) -> Result<(), Syntax> {
    if t.get(*at) == Some(&Token::Open) {
        if depth >= MAX_NESTING {
            return Err(Syntax::TooDeep);
        }
        *at += 1;
        or_expr(t, at, depth + 1)?;
        return expect(t, at, Token::Close, "a `(` is not closed");
    }
    expect(t, at, Token::Value, "a comparison lacks its left side")?;
    match t.get(*at) {
        Some(Token::Op | Token::In) => *at += 1,
        Some(Token::Not) => {
            *at += 1;
            expect(t, at, Token::In, "`not` is not followed by `in`")?;
        }
        _ => return Err(Syntax::NoOperator),
    }
    expect(t, at, Token::Value, "a comparison lacks its right side")
}

fn expect(t: &[Token], at: &mut usize, want: Token, why: &'static str) -> Result<(), Syntax> {
    if t.get(*at) == Some(&want) {
        *at += 1;
        Ok(())
    } else {
        Err(Syntax::Missing(why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(line: &str) -> Option<String> {
        check(line).into_iter().next().map(|r| r.why)
    }

    #[test]
    fn names_versions_extras_markers_and_comments_are_taken() {
        let good = "\u{feff}# pinned for the tool\n\n\
            idna==3.7\n\
            requests[socks, security] >= 2.31, <3  # a comment\n\
            Django~=4.2\n\
            zope.interface!=5.0.*\n\
            numpy===1.26.4\n\
            pkg_name-with.dots>1\n\
            tomli ; python_version < \"3.11\"\n\
            pywin32; sys_platform == 'win32' and (platform_machine == \"AMD64\" or extra == \"x\")\n\
            black[d]; python_version not in \"2.7\"\r\n\
            \t  six  \n\
            x[]\n";
        assert_eq!(check(good), Vec::new());
    }

    #[test]
    fn options_urls_paths_and_direct_references_are_refused_saying_why() {
        let cases = [
            ("-r /etc/shadow", "reads another file"),
            ("--requirement=/etc/shadow", "reads another file"),
            ("-r/etc/shadow", "reads another file"),
            ("-c constraints.txt", "reads another file"),
            ("-i http://127.0.0.1:9/simple", "another index"),
            ("--index-url http://evil/simple", "another index"),
            ("--extra-index-url http://evil/simple", "another index"),
            ("-f http://evil/wheels", "another index"),
            ("--find-links=./wheels", "another index"),
            ("--trusted-host evil", "another index"),
            ("-e .", "builds local"),
            ("--editable ./pkg", "builds local"),
            ("idna==3.7 --hash=sha256:0000", "hash-checking"),
            ("idna --global-option=x", "skilld's to set"),
            ("./pkg", "is a path"),
            ("pkg/", "is a path"),
            ("/abs/pkg", "is a path"),
            ("~/pkg", "is a path"),
            ("dist/pkg-1.0-py3-none-any.whl", "is a path"),
            ("pkg-1.0.tar.gz", "is a path"),
            ("file:///tmp/pkg", "is a URL"),
            ("git+https://github.com/x/y", "is a URL"),
            ("https://evil/pkg.whl", "is a URL"),
            ("pkg @ file:///tmp/pkg", "is a URL"),
            ("pkg@ https://evil/x.whl", "is a URL"),
            ("pkg @ something", "direct reference"),
        ];
        for (line, why) in cases {
            let got = refused(line).unwrap_or_else(|| panic!("{line} was taken"));
            assert!(got.contains(why), "{line}: {got}");
        }
    }

    #[test]
    fn anything_outside_the_grammar_is_refused() {
        for line in [
            "idna==",
            "idna==3.7 extra",
            "idna[x",
            "idna (>=1)",
            "idna==${VERSION}",
            "idna; os_name == \"posix\" --index-url=http://x",
            "idna; os_name == \"a b\"",
            "idna; os_name == \"posix\" and",
            "idna; whatever == \"x\"",
            "idna; (((((((((((((((((os_name == \"x\")))))))))))))))))",
            "idna\u{b}-r /etc/shadow",
            "idna\u{c}--index-url x",
            "idnа",
            "_idna",
            "idna==3.7#comment",
            "idna==3.7 \\",
            "idna==-1",
        ] {
            assert!(refused(line).is_some(), "{line:?} was taken");
        }
    }

    proptest::proptest! {
        /// Whatever a line holds, it is checked without a panic, and a
        /// line that passes names nothing pip would read as a path, a
        /// URL, a reference or an option.
        #[test]
        fn a_taken_line_is_never_a_path_url_or_option(line in "[a-z0-9 \t=<>!~.,;'\"()\\[\\]/@:#$\\\\-]{0,40}") {
            let taken = check(&line).is_empty();
            let body = strip_comment(&line);
            if taken {
                proptest::prop_assert!(!body.contains(['/', '\\', '@', '$']) && !body.contains("://"), "{line:?}");
                proptest::prop_assert!(!body.split([' ', '\t']).any(|w| w.starts_with('-')), "{line:?}");
                proptest::prop_assert!(!line.ends_with('\\'), "{line:?}");
            }
        }

        #[test]
        fn any_text_is_checked_without_panicking(text in "\\PC{0,200}") {
            let _ = check(&text);
        }
    }

    #[test]
    fn a_refusal_names_the_line() {
        let refused = check("idna\n\n# fine\n-r /etc/shadow\nsix\n");
        assert_eq!(refused.len(), 1);
        assert_eq!(
            (refused[0].line, refused[0].excerpt.as_str()),
            (4, "-r /etc/shadow")
        );
        assert!(
            refused[0]
                .to_string()
                .starts_with("requirements.txt line 4: `-r` is an option")
        );
    }
}
