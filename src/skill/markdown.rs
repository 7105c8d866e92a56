//! Tool blocks in a `SKILL.md` body (seed 000 §3), read with pulldown-cmark
//! so that fences, tables and nested examples are understood as Markdown is,
//! not guessed at line by line.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use std::ops::Range;

/// A `###` section that declares a tool: it has a `#### Parameters` or a
/// `#### Command` sub-section. Offsets are bytes into the body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolBlock {
    pub name: String,
    pub name_offset: usize,
    /// The paragraphs between the heading and the first `####`.
    pub description: String,
    pub params: Option<ParamsSection>,
    pub params_offset: usize,
    /// Code blocks of the `#### Command` section; exactly one is valid.
    pub commands: Vec<(String, usize)>,
    pub has_command_section: bool,
    pub command_offset: usize,
}

/// The `#### Parameters` section: a table, or prose such as "None.".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamsSection {
    None,
    Table {
        header: Vec<String>,
        rows: Vec<(Vec<String>, usize)>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Intro,
    Parameters,
    Command,
    Other,
}

/// A `###` section while it is being read.
struct Open {
    block: ToolBlock,
    section: Section,
    declares_tool: bool,
}

enum Capture {
    Nothing,
    Heading(HeadingLevel, String, usize),
    Paragraph(String),
    Cell(String),
    Code(String, usize),
}

/// Finds every tool block of a Markdown body, in order.
pub fn tool_blocks(body: &str) -> Vec<ToolBlock> {
    let mut blocks = Vec::new();
    let mut open: Option<Open> = None;
    let mut capture = Capture::Nothing;
    let mut row: Vec<String> = Vec::new();
    let mut row_offset = 0;
    let mut in_head = false;
    let mut header: Vec<String> = Vec::new();

    let finish = |open: Option<Open>, blocks: &mut Vec<ToolBlock>| {
        if let Some(o) = open.filter(|o| o.declares_tool) {
            blocks.push(o.block);
        }
    };

    for (event, range) in Parser::new_ext(body, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                capture = Capture::Heading(level, String::new(), range.start);
            }
            Event::End(TagEnd::Heading(_)) => {
                let Capture::Heading(level, text, offset) = std::mem::replace(&mut capture, Capture::Nothing)
                else {
                    continue;
                };
                let text = text.trim().to_owned();
                match level {
                    HeadingLevel::H1 | HeadingLevel::H2 => finish(open.take(), &mut blocks),
                    HeadingLevel::H3 => {
                        finish(open.take(), &mut blocks);
                        open = Some(Open {
                            block: ToolBlock {
                                name: text,
                                name_offset: offset + heading_text_start(body, &range),
                                ..ToolBlock::default()
                            },
                            section: Section::Intro,
                            declares_tool: false,
                        });
                    }
                    HeadingLevel::H4 => {
                        if let Some(o) = open.as_mut() {
                            o.section = match text.to_ascii_lowercase().as_str() {
                                "parameters" => {
                                    o.declares_tool = true;
                                    o.block.params_offset = range.start;
                                    Section::Parameters
                                }
                                "command" => {
                                    o.declares_tool = true;
                                    o.block.has_command_section = true;
                                    o.block.command_offset = range.start;
                                    Section::Command
                                }
                                _ => Section::Other,
                            };
                        }
                    }
                    _ => {}
                }
            }
            Event::Start(Tag::Paragraph) if open.is_some() => {
                capture = Capture::Paragraph(String::new());
            }
            Event::End(TagEnd::Paragraph) => {
                let Capture::Paragraph(text) = std::mem::replace(&mut capture, Capture::Nothing) else {
                    continue;
                };
                let Some(o) = open.as_mut() else { continue };
                let text = text.trim();
                match o.section {
                    Section::Intro if !text.is_empty() => {
                        if !o.block.description.is_empty() {
                            o.block.description.push_str("\n\n");
                        }
                        o.block.description.push_str(text);
                    }
                    Section::Parameters if o.block.params.is_none() => {
                        o.block.params = Some(ParamsSection::None);
                    }
                    _ => {}
                }
            }
            Event::Start(Tag::TableHead) => {
                in_head = true;
                row.clear();
            }
            Event::End(TagEnd::TableHead) => {
                in_head = false;
                header = std::mem::take(&mut row);
            }
            Event::Start(Tag::TableRow) => {
                row.clear();
                row_offset = range.start;
            }
            Event::End(TagEnd::TableRow) => {
                if let Some(o) = open.as_mut().filter(|o| o.section == Section::Parameters) {
                    let cells = std::mem::take(&mut row);
                    match &mut o.block.params {
                        Some(ParamsSection::Table { rows, .. }) => rows.push((cells, row_offset)),
                        _ => {
                            o.block.params = Some(ParamsSection::Table {
                                header: header.clone(),
                                rows: vec![(cells, row_offset)],
                            })
                        }
                    }
                }
            }
            Event::End(TagEnd::Table) => {
                // A table with a header and no rows still declares "no parameters".
                if let Some(o) = open.as_mut().filter(|o| o.section == Section::Parameters)
                    && o.block.params.is_none()
                {
                    o.block.params = Some(ParamsSection::Table {
                        header: std::mem::take(&mut header),
                        rows: Vec::new(),
                    });
                }
                header.clear();
            }
            Event::Start(Tag::TableCell) => capture = Capture::Cell(String::new()),
            Event::End(TagEnd::TableCell) => {
                if let Capture::Cell(text) = std::mem::replace(&mut capture, Capture::Nothing) {
                    row.push(text.trim().to_owned());
                }
                let _ = in_head;
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                let start = match kind {
                    CodeBlockKind::Fenced(_) => body[range.start..]
                        .find('\n')
                        .map_or(range.start, |i| range.start + i + 1),
                    CodeBlockKind::Indented => range.start,
                };
                capture = Capture::Code(String::new(), start);
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Capture::Code(text, offset) = std::mem::replace(&mut capture, Capture::Nothing)
                    && let Some(o) = open.as_mut().filter(|o| o.section == Section::Command)
                {
                    o.block.commands.push((text, offset));
                }
            }
            Event::Text(t) | Event::Code(t) => match &mut capture {
                Capture::Heading(_, s, _)
                | Capture::Paragraph(s)
                | Capture::Cell(s)
                | Capture::Code(s, _) => s.push_str(&t),
                Capture::Nothing => {}
            },
            Event::SoftBreak => match &mut capture {
                Capture::Paragraph(s) | Capture::Heading(_, s, _) => s.push(' '),
                _ => {}
            },
            Event::HardBreak => {
                if let Capture::Paragraph(s) = &mut capture {
                    s.push('\n');
                }
            }
            _ => {}
        }
    }
    finish(open, &mut blocks);
    blocks
}

/// Offset of the heading's text past its `### ` marker, for diagnostics.
fn heading_text_start(body: &str, range: &Range<usize>) -> usize {
    let line = body.get(range.clone()).unwrap_or("");
    let hashes = line.len() - line.trim_start_matches('#').len();
    let spaces = line[hashes..].len() - line[hashes..].trim_start().len();
    hashes + spaces
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIT: &str = r#"
# Git

Some prose.

### git_status

Show the current git status.

#### Parameters

None.

#### Command

```bash
git status --short
```

### git_log

Show recent
commit history.

#### Parameters

| Name | Type | Required | Description |
|------|------|----------|-------------|
| count | integer | no | Number of commits (default: 10) |
| `since` | string | no | A date |

#### Command

```bash
git log --oneline -n {{count}}
```

## Notes

### Not a tool

Just prose with an example:

````markdown
### fake_tool
#### Command
```bash
rm -rf /
```
````
"#;

    #[test]
    fn finds_blocks_params_and_commands() {
        let blocks = tool_blocks(GIT);
        assert_eq!(blocks.len(), 2, "{blocks:#?}");
        assert_eq!(blocks[0].name, "git_status");
        assert_eq!(blocks[0].description, "Show the current git status.");
        assert_eq!(blocks[0].params, Some(ParamsSection::None));
        assert_eq!(blocks[0].commands[0].0, "git status --short\n");
        assert_eq!(blocks[1].description, "Show recent commit history.");
        let Some(ParamsSection::Table { header, rows }) = &blocks[1].params else {
            panic!("{:?}", blocks[1].params)
        };
        assert_eq!(header, &["Name", "Type", "Required", "Description"]);
        assert_eq!(rows[1].0, ["since", "string", "no", "A date"]);
        assert_eq!(&GIT[blocks[1].commands[0].1..][..7], "git log");
        assert_eq!(&GIT[blocks[1].name_offset..][..7], "git_log");
    }
}
