//! Property tests of the skill parser's pure parts: frontmatter splitting,
//! bounded YAML, and command templates (parse and render).
//!
//! Case counts are kept modest so the whole module runs in a few seconds.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use skilld::skill::frontmatter::{self, NODE_BUDGET};
use skilld::skill::template::{CommandTemplate, Piece, RenderError};
use std::time::{Duration, Instant};

/// Generous bound for one `parse_yaml` call (debug build, loaded machine):
/// the node budget makes the real figure a few tens of milliseconds.
const YAML_TIME_LIMIT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

/// Strings rich in the characters the parsers care about.
fn tricky_string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[-.\\r\\n \\t\u{feff}{}:_a-z'\"\\\\#$();*?\\[\\]&|<>!~`]{0,80}",
    ]
}

/// A line (no `\n`) of a frontmatter, one that never closes it.
fn yaml_line() -> impl Strategy<Value = String> {
    prop_oneof![
        "[^\\n]{0,40}",
        "[-. \\t\\r]{0,6}",
        Just("----".to_owned()),
        Just("....".to_owned()),
        Just(" ---".to_owned()),
        Just("--- x".to_owned()),
        Just("name: x".to_owned()),
    ]
    .prop_filter("not a fence line", |l| {
        let t = l.trim_end();
        t != "---" && t != "..."
    })
}

/// Inputs made of fence-like and ordinary lines, LF or CRLF, maybe a BOM.
fn fence_heavy_doc() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("---".to_owned()),
        Just("...".to_owned()),
        Just("--- \t".to_owned()),
        Just("---\r".to_owned()),
        Just("\u{feff}---".to_owned()),
        "[^\\n]{0,20}",
    ];
    (
        any::<bool>(),
        prop::collection::vec(line, 0..8),
        prop_oneof![Just("\n"), Just("\r\n")],
        any::<bool>(),
    )
        .prop_map(|(bom, lines, nl, trailing)| {
            let mut s = if bom { "\u{feff}".to_owned() } else { String::new() };
            s.push_str(&lines.join(nl));
            if trailing {
                s.push_str(nl);
            }
            s
        })
}

/// A parameter name as `is_param_name` accepts it.
fn param_name() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,20}"
}

/// A literal word that holds no valid `{{name}}` (so it stays one literal):
/// either anything without `{{`, or brace-heavy text without any character
/// that could start a parameter name (`{{.State}}`, `{{ }}`, `{{1}}`).
fn literal_word() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[{}. 0-9$:#'\"\\\\-]{0,20}",
        Just("{{.State}}".to_owned()),
        Just("{{ }}".to_owned()),
        Just("--".to_owned()),
        Just(String::new()),
    ]
    .prop_filter("no NUL, no placeholder", |s| {
        !s.contains('\0') && (!s.contains("{{") || !s.chars().any(|c| c.is_ascii_alphabetic() || c == '_'))
    })
}

#[derive(Debug, Clone)]
enum ArgWord {
    Literal(String),
    Var(String),
}

/// What separates words in a generated template: blanks, newlines,
/// `\`-newline continuations (indented or not) and comment lines.
fn separator() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(" ".to_owned()),
        Just("\t".to_owned()),
        Just("  ".to_owned()),
        Just("\n".to_owned()),
        Just(" \\\n".to_owned()),
        Just(" \\\n  ".to_owned()),
        Just("\t\\\n\t".to_owned()),
        // Comment text without quotes or backslashes: see
        // `template_comments_do_not_change_continuations`.
        "[a-z0-9 {}$;#-]{0,20}".prop_map(|c| format!("\n  # {c}\n  ")),
    ]
}

/// A value that is dangerous to any shell, but not an option and not NUL.
fn hostile_value() -> impl Strategy<Value = String> {
    let base = prop_oneof![
        any::<String>(),
        "[ a-z'\"`;$(){}*?\\[\\]\\n\\t\\\\|&<>~#=]{0,40}",
        Just(String::new()),
        Just("{{v}}".to_owned()),
        Just("{{x}}".to_owned()),
        Just("a b; $(rm -rf /) `id` *?[a] {{x}} {{v}}\n--".to_owned()),
    ];
    (
        base,
        any::<String>(),
        prop_oneof![Just(""), Just("{{x}}"), Just("{{v}}"), Just(" {{v:--y}} ")],
    )
        .prop_map(|(a, b, inject)| {
            // Sometimes splice a placeholder into the value.
            if inject.is_empty() {
                a
            } else {
                format!("{a}{inject}{b}")
            }
        })
        .prop_filter("not an option, no NUL", |s| {
            !s.starts_with('-') && !s.contains('\0')
        })
}

/// Literal words around the placeholder under test; never `--`.
fn context_word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("-n".to_owned()),
        Just("--flag".to_owned()),
        Just("'a b'".to_owned()),
        Just("''".to_owned()),
        Just("{{x}}".to_owned()),
        Just("--x={{x}}".to_owned()),
        Just("{{t:--t}}".to_owned()),
        "[a-z]{1,5}",
    ]
}

/// What a context word renders to with `x = "X"` and `t = true`.
fn rendered_context(word: &str) -> String {
    match word {
        "'a b'" => "a b".to_owned(),
        "''" => String::new(),
        "{{x}}" => "X".to_owned(),
        "--x={{x}}" => "--x=X".to_owned(),
        "{{t:--t}}" => "--t".to_owned(),
        other => other.to_owned(),
    }
}

fn args_with(v: Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("v".into(), v);
    m.insert("x".into(), json!("X"));
    m.insert("t".into(), json!(true));
    m
}

// ---------------------------------------------------------------------------
// YAML models: alias bombs and random alias graphs, with their expansion
// ---------------------------------------------------------------------------

/// A flow-style YAML node whose aliases name earlier anchors.
#[derive(Debug, Clone)]
enum YNode {
    Word(u8),
    Int(i32),
    /// `*aN`, N taken modulo the anchors defined so far.
    Alias(usize),
    Seq(Vec<YNode>),
    Map(Vec<YNode>),
}

fn ynode() -> impl Strategy<Value = YNode> {
    let leaf = prop_oneof![
        (0u8..3).prop_map(YNode::Word),
        any::<i32>().prop_map(YNode::Int),
        (0usize..64).prop_map(YNode::Alias),
        (0usize..64).prop_map(YNode::Alias),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(YNode::Seq),
            prop::collection::vec(inner, 0..6).prop_map(YNode::Map),
        ]
    })
}

impl YNode {
    /// Flow YAML text, with `defined` anchors available to aliases.
    fn render(&self, defined: usize, out: &mut String) {
        match self {
            YNode::Word(w) => out.push_str(["x", "yy", "zzz"][*w as usize]),
            YNode::Int(i) => out.push_str(&i.to_string()),
            YNode::Alias(i) if defined == 0 => out.push_str(&format!("w{i}")),
            YNode::Alias(i) => out.push_str(&format!("*a{}", i % defined)),
            YNode::Seq(items) => {
                out.push('[');
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        out.push_str(", ");
                    }
                    item.render(defined, out);
                }
                out.push(']');
            }
            YNode::Map(items) => {
                out.push('{');
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&format!("k{n}: "));
                    item.render(defined, out);
                }
                out.push('}');
            }
        }
    }

    /// Nodes after expansion (saturating) and source nodes, given the
    /// expansion sizes of the anchors defined so far.
    fn count(&self, anchors: &[u128]) -> (u128, u128) {
        match self {
            YNode::Word(_) | YNode::Int(_) => (1, 1),
            YNode::Alias(_) if anchors.is_empty() => (1, 1),
            YNode::Alias(i) => (anchors[i % anchors.len()], 1),
            YNode::Seq(items) => items.iter().fold((1, 1), |(e, s), it| {
                let (ie, is) = it.count(anchors);
                (e.saturating_add(ie), s + is)
            }),
            YNode::Map(items) => items.iter().fold((1, 1), |(e, s), it| {
                let (ie, is) = it.count(anchors);
                (e.saturating_add(ie).saturating_add(1), s + is + 1)
            }),
        }
    }

    /// The JSON the node expands to; only called when the expansion is small.
    fn value(&self, anchors: &[Value]) -> Value {
        match self {
            YNode::Word(w) => json!(["x", "yy", "zzz"][*w as usize]),
            YNode::Int(i) => json!(i),
            YNode::Alias(i) if anchors.is_empty() => json!(format!("w{i}")),
            YNode::Alias(i) => anchors[i % anchors.len()].clone(),
            YNode::Seq(items) => Value::Array(items.iter().map(|i| i.value(anchors)).collect()),
            YNode::Map(items) => Value::Object(
                items
                    .iter()
                    .enumerate()
                    .map(|(n, i)| (format!("k{n}"), i.value(anchors)))
                    .collect(),
            ),
        }
    }
}

/// `a0: &a0 <node0>` … as a document, with its expanded and source node
/// counts and (when small) its expected value.
fn alias_document(nodes: &[YNode]) -> (String, u128, u128, Option<Value>) {
    // An anchor may not sit on an alias (`&a1 *a0`): anchor collections only.
    let nodes: Vec<YNode> = nodes
        .iter()
        .map(|n| match n {
            YNode::Seq(_) | YNode::Map(_) => n.clone(),
            leaf => YNode::Seq(vec![leaf.clone()]),
        })
        .collect();
    let mut yaml = String::new();
    let mut sizes: Vec<u128> = Vec::new();
    let (mut expanded, mut source) = (1u128, 1u128);
    for (i, node) in nodes.iter().enumerate() {
        yaml.push_str(&format!("a{i}: &a{i} "));
        node.render(i, &mut yaml);
        yaml.push('\n');
        let (e, s) = node.count(&sizes);
        sizes.push(e);
        expanded = expanded.saturating_add(e).saturating_add(1);
        source += s + 1;
    }
    let value = (expanded <= 20_000).then(|| {
        let mut anchors = Vec::new();
        let mut map = Map::new();
        for (i, node) in nodes.iter().enumerate() {
            let v = node.value(&anchors);
            anchors.push(v.clone());
            map.insert(format!("a{i}"), v);
        }
        Value::Object(map)
    });
    (yaml, expanded, source, value)
}

/// The classic billion laughs, `depth` levels of `width` aliases each, in
/// flow or block style. Returns the text and the node count it expands to.
fn alias_bomb(depth: u32, width: usize, block: bool) -> (String, u128) {
    let mut yaml = String::new();
    let list = |item: &str| -> String {
        if block {
            (0..width).map(|_| format!("\n  - {item}")).collect()
        } else {
            format!(" [{}]", vec![item; width].join(", "))
        }
    };
    yaml.push_str(&format!("l0: &l0{}\n", list("lol")));
    let mut level: u128 = 1 + width as u128;
    let mut total: u128 = 1 + 1 + level;
    for d in 1..=depth {
        yaml.push_str(&format!("l{d}: &l{d}{}\n", list(&format!("*l{}", d - 1))));
        level = 1u128.saturating_add(level.saturating_mul(width as u128));
        total = total.saturating_add(1).saturating_add(level);
    }
    (yaml, total)
}

fn timed_parse(yaml: &str) -> Result<Value, frontmatter::YamlError> {
    let start = Instant::now();
    let out = frontmatter::parse_yaml(yaml);
    let took = start.elapsed();
    assert!(
        took < YAML_TIME_LIMIT,
        "parse_yaml took {took:?} on {} bytes",
        yaml.len()
    );
    out
}

// ---------------------------------------------------------------------------
// frontmatter::split
// ---------------------------------------------------------------------------

/// Checks the offsets of a split against the input it came from.
fn assert_offsets(input: &str, s: &frontmatter::Split<'_>) {
    if let Some(yaml) = s.yaml {
        let at = input.get(s.yaml_offset..s.yaml_offset + yaml.len());
        assert_eq!(
            at,
            Some(yaml),
            "yaml_offset {} does not point at the yaml",
            s.yaml_offset
        );
    }
    assert_eq!(
        input.get(s.body_offset..),
        Some(s.body),
        "body_offset {} does not point at the body",
        s.body_offset
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn split_never_panics_and_offsets_point_at_the_slices(input in prop_oneof![tricky_string(), fence_heavy_doc()]) {
        if let Ok(s) = frontmatter::split(&input) {
            assert_offsets(&input, &s);
            // The body is always a suffix of the input, after any frontmatter.
            if let Some(yaml) = s.yaml {
                prop_assert!(s.yaml_offset + yaml.len() <= s.body_offset);
            }
        }
    }

    #[test]
    fn split_round_trips_fenced_frontmatter(
        lines in prop::collection::vec(yaml_line(), 0..8),
        body in prop_oneof![any::<String>(), fence_heavy_doc()],
    ) {
        let yaml: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let doc = format!("---\n{yaml}---\n{body}");
        let s = frontmatter::split(&doc).expect("closed frontmatter");
        prop_assert_eq!(s.yaml, Some(yaml.as_str()));
        prop_assert_eq!(s.body, body.as_str());
        prop_assert_eq!(s.yaml_offset, 4);
        prop_assert_eq!(s.body_offset, 4 + yaml.len() + 4);
        assert_offsets(&doc, &s);
    }

    #[test]
    fn split_without_opening_fence_is_all_body(
        bom in any::<bool>(),
        first in "[^\\n]{0,30}",
        rest in prop::option::of(fence_heavy_doc()),
    ) {
        let mut input = if bom { "\u{feff}".to_owned() } else { String::new() };
        input.push_str(&first);
        if let Some(r) = &rest {
            input.push('\n');
            input.push_str(r);
        }
        // One leading byte-order mark is skipped; the line after it decides.
        let unmarked = input.strip_prefix('\u{feff}').unwrap_or(&input);
        let first_line = unmarked.split('\n').next().unwrap_or("");
        prop_assume!(first_line.trim_end() != "---");
        let s = frontmatter::split(&input).expect("no frontmatter is never unclosed");
        prop_assert_eq!(s.yaml, None);
        prop_assert_eq!(s.body, unmarked);
        prop_assert_eq!(s.body_offset, input.len() - unmarked.len());
        if !input.starts_with('\u{feff}') {
            prop_assert_eq!(s.body, input.as_str());
            prop_assert_eq!(s.body_offset, 0);
        }
    }
}

// ---------------------------------------------------------------------------
// frontmatter::parse_yaml
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn parse_yaml_never_panics_on_arbitrary_text(yaml in prop_oneof![
        tricky_string(),
        "([a-z&*]{1,3}: ?[\\[\\]{}&*a-z0-9,:!\"' -]{0,10}\\n {0,4}-? ?){0,12}",
    ]) {
        let _ = timed_parse(&yaml);
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn parse_yaml_alias_graphs_expand_exactly_or_are_refused(nodes in prop::collection::vec(ynode(), 1..12)) {
        let (yaml, expanded, source, expected) = alias_document(&nodes);
        let got = timed_parse(&yaml);
        if expanded > NODE_BUDGET as u128 {
            prop_assert!(got.is_err(), "{expanded} nodes accepted from\n{yaml}");
        } else if expanded <= 100 * source {
            // Within both the node budget and the YAML crate's alias-jump
            // limit (100 jumps per event): the exact expansion comes back.
            let got = got.map_err(|e| TestCaseError::fail(format!("{}\n{yaml}", e.message)))?;
            if let Some(expected) = expected {
                prop_assert_eq!(got, expected);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn parse_yaml_alias_bombs_error_instead_of_expanding(
        depth in 1u32..24,
        width in 2usize..16,
        block in any::<bool>(),
    ) {
        let (yaml, total) = alias_bomb(depth, width, block);
        match timed_parse(&yaml) {
            Ok(v) => {
                prop_assert!(total <= NODE_BUDGET as u128, "{total} nodes accepted");
                let key = format!("l{depth}");
                prop_assert!(v.get(&key).is_some());
            }
            // Refused by the node budget, or earlier by the YAML crate's
            // alias-jump limit; never by anything else (the text is valid).
            Err(e) => prop_assert!(
                e.message.contains("expands") || e.message.contains("repetition limit"),
                "unexpected error for a bomb of {} nodes: {}", total, e.message
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// CommandTemplate::parse
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn template_parse_never_panics(src in prop_oneof![
        tricky_string(),
        "([a-z{}:_ '\"\\\\#\\n-]|\\{\\{[a-z_: -]{0,6}\\}\\}){0,30}",
    ]) {
        if let Ok(t) = CommandTemplate::parse(&src) {
            prop_assert!(!t.program.is_empty());
            let _ = t.placeholders().count();
        }
    }

    #[test]
    fn template_parse_yields_literals_and_placeholders_exactly(
        program in any::<String>().prop_filter("a usable program", |p| {
            !p.is_empty() && !p.contains('\0') && !p.contains("{{")
        }),
        words in prop::collection::vec(
            prop_oneof![
                literal_word().prop_map(ArgWord::Literal),
                param_name().prop_map(ArgWord::Var),
            ],
            0..8,
        ),
        seps in prop::collection::vec(separator(), 8),
    ) {
        let mut src = shlex::try_quote(&program).unwrap().into_owned();
        for (word, sep) in words.iter().zip(&seps) {
            src.push_str(sep);
            match word {
                ArgWord::Literal(s) => src.push_str(&shlex::try_quote(s).unwrap()),
                ArgWord::Var(n) => src.push_str(&format!("{{{{{n}}}}}")),
            }
        }
        let t = CommandTemplate::parse(&src)
            .map_err(|e| TestCaseError::fail(format!("{e} for {src:?}")))?;
        prop_assert_eq!(&t.program, &program, "source {:?}", src);
        prop_assert_eq!(t.args.len(), words.len(), "source {:?}", src);
        for (got, want) in t.args.iter().zip(&words) {
            match want {
                ArgWord::Literal(s) if s.is_empty() => {
                    prop_assert!(
                        got.pieces.is_empty() || got.pieces == [Piece::Literal(String::new())],
                        "{:?} for an empty literal", got.pieces
                    );
                }
                ArgWord::Literal(s) => prop_assert_eq!(&got.pieces, &vec![Piece::Literal(s.clone())]),
                ArgWord::Var(n) => prop_assert_eq!(got.standalone_var(), Some(n.as_str())),
            }
        }
        let want: Vec<&str> = words
            .iter()
            .filter_map(|w| match w {
                ArgWord::Var(n) => Some(n.as_str()),
                ArgWord::Literal(_) => None,
            })
            .collect();
        prop_assert_eq!(t.placeholders().collect::<Vec<_>>(), want);
    }
}

// ---------------------------------------------------------------------------
// CommandTemplate::render
// ---------------------------------------------------------------------------

fn template(pre: &[String], word: &str, post: &[String]) -> CommandTemplate {
    let src = format!("prog {} {word} {}", pre.join(" "), post.join(" "));
    CommandTemplate::parse(&src).unwrap_or_else(|e| panic!("{e}: {src}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn render_standalone_value_is_exactly_one_argument(
        pre in prop::collection::vec(context_word(), 0..3),
        post in prop::collection::vec(context_word(), 0..3),
        value in hostile_value(),
    ) {
        let t = template(&pre, "{{v}}", &post);
        let argv = t.render(&args_with(json!(value))).unwrap();
        let mut want: Vec<String> = pre.iter().map(|w| rendered_context(w)).collect();
        want.push(value);
        want.extend(post.iter().map(|w| rendered_context(w)));
        prop_assert_eq!(argv, want);
    }

    #[test]
    fn render_refuses_option_values_unless_after_double_dash(
        pre in prop::collection::vec(context_word(), 0..3),
        post in prop::collection::vec(prop_oneof![context_word(), Just("--".to_owned())], 0..3),
        rest in any::<String>().prop_filter("no NUL", |s| !s.contains('\0')),
        as_array in any::<bool>(),
        dd_at in prop::option::of(0usize..4),
    ) {
        let value = format!("-{rest}");
        let v = if as_array { json!(["ok", value]) } else { json!(value) };
        // Without a `--` before it (one after it does not count): refused.
        let t = template(&pre, "{{v}}", &post);
        prop_assert_eq!(
            t.render(&args_with(v.clone())),
            Err(RenderError::ArgumentInjection { param: "v".into() })
        );
        // With a literal `--` somewhere before it: passed through as is.
        if let Some(at) = dd_at {
            let mut pre = pre;
            pre.insert(at.min(pre.len()), "--".to_owned());
            let argv = template(&pre, "{{v}}", &post).render(&args_with(v)).unwrap();
            let mut want: Vec<String> = pre.iter().map(|w| rendered_context(w)).collect();
            if as_array {
                want.push("ok".to_owned());
            }
            want.push(value);
            want.extend(post.iter().map(|w| rendered_context(w)));
            prop_assert_eq!(argv, want);
        }
    }

    #[test]
    fn render_refuses_nul_anywhere(
        a in any::<String>(),
        b in any::<String>(),
        dash in any::<bool>(),
        double_dash in any::<bool>(),
        form in 0usize..4,
    ) {
        let value = format!("{}{a}\0{b}", if dash { "-" } else { "" });
        let word = match form {
            0 | 1 => "{{v}}",
            2 => "--v={{v}}",
            _ => "pre{{v}}post",
        };
        let v = if form == 1 { json!(["fine", value]) } else { json!(value) };
        let pre = if double_dash { vec!["--".to_owned()] } else { Vec::new() };
        let t = template(&pre, word, &[]);
        prop_assert_eq!(t.render(&args_with(v)), Err(RenderError::Nul { param: "v".into() }));
    }

    #[test]
    fn render_standalone_array_gives_one_argument_per_item(
        items in prop::collection::vec(
            prop_oneof![hostile_value(), any::<String>().prop_map(|s| format!("-{s}"))]
                .prop_filter("no NUL", |s| !s.contains('\0')),
            0..8,
        ),
        pre in prop::collection::vec(context_word(), 0..3),
        post in prop::collection::vec(context_word(), 0..3),
    ) {
        // Items may start with '-' here, so the template has a `--` first.
        let mut pre = pre;
        pre.insert(0, "--".to_owned());
        let t = template(&pre, "{{v}}", &post);
        let argv = t.render(&args_with(json!(items))).unwrap();
        let mut want: Vec<String> = pre.iter().map(|w| rendered_context(w)).collect();
        want.extend(items.iter().cloned());
        want.extend(post.iter().map(|w| rendered_context(w)));
        prop_assert_eq!(argv, want);

        // Without the `--`, items that are not options pass one by one too.
        let safe: Vec<String> = items.into_iter().filter(|i| !i.starts_with('-')).collect();
        let argv = template(&[], "{{v}}", &[]).render(&args_with(json!(safe))).unwrap();
        prop_assert_eq!(argv, safe);
    }

    #[test]
    fn render_negative_numbers_are_exempt_from_the_guard(n in any::<i64>(), f in -1e9f64..1e9) {
        let t = template(&[], "{{v}}", &[]);
        prop_assert_eq!(t.render(&args_with(json!(n))).unwrap(), vec![n.to_string()]);
        let fv = json!(f);
        prop_assert_eq!(t.render(&args_with(fv.clone())).unwrap(), vec![fv.to_string()]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the values, a URL keeps the template's path segments, its
    /// two query parameters and its one fragment, and each value decodes
    /// back to itself from the place it was put.
    #[test]
    fn render_url_values_stay_in_their_component(
        p in any::<String>(),
        q in any::<String>(),
        f in any::<String>(),
    ) {
        prop_assume!(![&p, &q, &f].iter().any(|v| v.contains('\0')));
        let t = CommandTemplate::parse("curl https://api.example.com/items/{{p}}/raw?q={{q}}&n=5#{{f}}").unwrap();
        let mut args = Map::new();
        for (k, v) in [("p", &p), ("q", &q), ("f", &f)] {
            args.insert(k.into(), json!(v));
        }
        let argv = t.render(&args).unwrap();
        prop_assert_eq!(argv.len(), 1);
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8().unwrap().into_owned();
        let (rest, fragment) = argv[0].split_once('#').unwrap();
        prop_assert!(!fragment.contains('#'));
        let (path, query) = rest.split_once('?').unwrap();
        prop_assert!(!query.contains('?'));
        let segments: Vec<&str> = path.strip_prefix("https://api.example.com/").unwrap().split('/').collect();
        prop_assert_eq!(segments.len(), 3);
        prop_assert_eq!(segments[0], "items");
        prop_assert_eq!(segments[2], "raw");
        prop_assert_eq!(decode(segments[1]), p);
        prop_assert!(segments[1] != "." && segments[1] != "..");
        let params: Vec<&str> = query.split('&').collect();
        prop_assert_eq!(params.len(), 2);
        prop_assert_eq!(params[1], "n=5");
        let value = params[0].strip_prefix("q=").unwrap();
        prop_assert!(!value.contains('='));
        prop_assert_eq!(decode(value), q);
        prop_assert_eq!(decode(fragment), f);
    }

    /// Seed 000 §3.4: in a URL's query, each missing value takes its own
    /// pair away and nothing else; the pairs given stay, in order, each
    /// value decoding back to itself.
    #[test]
    fn render_url_query_loses_only_the_pairs_of_missing_values(
        values in prop::collection::vec(prop::option::of(any::<String>()), 1..6),
        fragment in any::<bool>(),
    ) {
        prop_assume!(values.iter().flatten().all(|v| !v.contains('\0')));
        let pairs: Vec<String> = (0..values.len()).map(|i| format!("k{i}={{{{v{i}}}}}")).collect();
        let hash = if fragment { "#top" } else { "" };
        let t = CommandTemplate::parse(&format!("curl https://h.example/s?{}{hash}", pairs.join("&"))).unwrap();
        let mut args = Map::new();
        for (i, v) in values.iter().enumerate() {
            if let Some(v) = v {
                args.insert(format!("v{i}"), json!(v));
            }
        }
        let argv = t.render(&args).unwrap();
        prop_assert_eq!(argv.len(), 1);
        let (rest, tail) = match argv[0].split_once('#') {
            Some((rest, tail)) => (rest, Some(tail)),
            None => (argv[0].as_str(), None),
        };
        prop_assert_eq!(tail, fragment.then_some("top"));
        let given: Vec<(usize, &String)> =
            values.iter().enumerate().filter_map(|(i, v)| v.as_ref().map(|v| (i, v))).collect();
        if given.is_empty() {
            prop_assert_eq!(rest, "https://h.example/s");
            return Ok(());
        }
        let query = rest.strip_prefix("https://h.example/s?").unwrap();
        let kept: Vec<&str> = query.split('&').collect();
        prop_assert_eq!(kept.len(), given.len());
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8().unwrap().into_owned();
        for (pair, (i, v)) in kept.iter().zip(given) {
            let value = pair.strip_prefix(&format!("k{i}=")).unwrap();
            prop_assert_eq!(decode(value), v.clone());
        }
    }

    /// A value that begins a word is guarded whatever follows it in the
    /// word, unless a literal `--` came first.
    #[test]
    fn render_guards_values_that_begin_a_word(
        rest in any::<String>().prop_filter("no NUL", |s| !s.contains('\0')),
        suffix in prop_oneof![Just(".txt"), Just("{{x}}"), Just("=1"), Just("/a b")],
        double_dash in any::<bool>(),
    ) {
        let value = format!("-{rest}");
        let pre = if double_dash { vec!["--".to_owned()] } else { Vec::new() };
        let t = template(&pre, &format!("{{{{v}}}}{suffix}"), &[]);
        let rendered = t.render(&args_with(json!(value)));
        if double_dash {
            let argv = rendered.unwrap();
            prop_assert!(argv[1].starts_with(&value));
        } else {
            prop_assert_eq!(rendered, Err(RenderError::ArgumentInjection { param: "v".into() }));
        }
    }
}

// ---------------------------------------------------------------------------
// Regression tests for bugs these properties found in src/skill/template.rs
// (both fixed).
// ---------------------------------------------------------------------------

/// `parse` says "`\`-newline joins lines", but shlex starts a word at a
/// backslash-newline that follows a blank, so an indented continuation adds
/// an empty word to the template.
#[test]

fn template_line_continuation_adds_no_empty_word() {
    let t = CommandTemplate::parse("curl -s \\\n  https://example.com").unwrap();
    let words: Vec<_> = t.args.iter().map(|w| w.pieces.clone()).collect();
    assert_eq!(
        words,
        [
            vec![Piece::Literal("-s".into())],
            vec![Piece::Literal("https://example.com".into())]
        ]
    );
}

/// A quoted empty argument (`ssh-keygen -N '' -f key`) is an argument: it
/// must reach the program, not be dropped like an absent flag.
#[test]

fn render_keeps_empty_literal_words() {
    let t = CommandTemplate::parse("ssh-keygen -N '' -f {{v}}").unwrap();
    assert_eq!(
        t.render(&args_with(json!("key"))).unwrap(),
        ["-N", "", "-f", "key"]
    );
}

/// A comment runs to the end of its line whatever it holds: a quote in it
/// opens nothing, and a backslash before its newline continues nothing.
#[test]
fn template_comments_do_not_change_continuations() {
    let t = CommandTemplate::parse("# don't\ncurl -s \\\n  https://x").unwrap();
    let words: Vec<_> = t.args.iter().map(|w| w.pieces.clone()).collect();
    assert_eq!(
        words,
        [
            vec![Piece::Literal("-s".into())],
            vec![Piece::Literal("https://x".into())]
        ]
    );

    let t = CommandTemplate::parse("# see the note \\\ncurl x").unwrap();
    assert_eq!(t.program, "curl");
    assert_eq!(t.args.len(), 1);
}
