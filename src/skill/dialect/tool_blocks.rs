//! Tool blocks in a `SKILL.md` body, read with pulldown-cmark
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

/// The text being collected until its element ends.
#[derive(Default)]
enum Capture {
    #[default]
    Nothing,
    Heading(HeadingLevel, String, usize),
    Paragraph(String),
    Cell(String),
    Code(String, usize),
}

/// Finds every tool block of a Markdown body, in order.
pub fn tool_blocks(body: &str) -> Vec<ToolBlock> {
    let mut reader = Reader {
        body,
        blocks: Vec::new(),
        open: None,
        capture: Capture::Nothing,
        row: Vec::new(),
        row_offset: 0,
        header: Vec::new(),
    };
    for (event, range) in Parser::new_ext(body, Options::ENABLE_TABLES).into_offset_iter() {
        reader.event(event, range);
    }
    reader.close();
    reader.blocks
}

/// The state of [`tool_blocks`] between events.
struct Reader<'b> {
    body: &'b str,
    blocks: Vec<ToolBlock>,
    open: Option<Open>,
    capture: Capture,
    /// The cells of the table row being read, and where the row starts.
    row: Vec<String>,
    row_offset: usize,
    /// The header cells of the table being read.
    header: Vec<String>,
}

impl Reader<'_> {
    fn event(&mut self, event: Event<'_>, range: Range<usize>) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                self.capture = Capture::Heading(level, String::new(), range.start);
            }
            Event::End(TagEnd::Heading(_)) => self.heading(&range),
            Event::Start(Tag::Paragraph) if self.open.is_some() => {
                self.capture = Capture::Paragraph(String::new());
            }
            Event::End(TagEnd::Paragraph) => self.paragraph(),
            Event::Start(Tag::TableHead) => self.row.clear(),
            Event::End(TagEnd::TableHead) => self.header = std::mem::take(&mut self.row),
            Event::Start(Tag::TableRow) => {
                self.row.clear();
                self.row_offset = range.start;
            }
            Event::End(TagEnd::TableRow) => self.table_row(),
            Event::End(TagEnd::Table) => self.table_end(),
            Event::Start(Tag::TableCell) => self.capture = Capture::Cell(String::new()),
            Event::End(TagEnd::TableCell) => {
                if let Capture::Cell(text) = std::mem::take(&mut self.capture) {
                    self.row.push(text.trim().to_owned());
                }
            }
            Event::Start(Tag::CodeBlock(kind)) => self.code_start(&kind, &range),
            Event::End(TagEnd::CodeBlock) => self.code_end(),
            Event::Text(t) | Event::Code(t) => match &mut self.capture {
                Capture::Heading(_, s, _)
                | Capture::Paragraph(s)
                | Capture::Cell(s)
                | Capture::Code(s, _) => s.push_str(&t),
                Capture::Nothing => {}
            },
            Event::SoftBreak => match &mut self.capture {
                Capture::Paragraph(s) | Capture::Heading(_, s, _) => s.push(' '),
                _ => {}
            },
            Event::HardBreak => {
                if let Capture::Paragraph(s) = &mut self.capture {
                    s.push('\n');
                }
            }
            _ => {}
        }
    }

    /// Ends the open `###` section, keeping it if it declares a tool.
    fn close(&mut self) {
        if let Some(o) = self.open.take().filter(|o| o.declares_tool) {
            self.blocks.push(o.block);
        }
    }

    /// `#` and `##` end a section, `###` starts one, `####` starts a
    /// sub-section of it.
    fn heading(&mut self, range: &Range<usize>) {
        let Capture::Heading(level, text, offset) = std::mem::take(&mut self.capture) else {
            return;
        };
        let text = text.trim().to_owned();
        match level {
            HeadingLevel::H1 | HeadingLevel::H2 => self.close(),
            HeadingLevel::H3 => {
                self.close();
                self.open = Some(Open {
                    block: ToolBlock {
                        name: text,
                        name_offset: offset + heading_text_start(self.body, range),
                        ..ToolBlock::default()
                    },
                    section: Section::Intro,
                    declares_tool: false,
                });
            }
            HeadingLevel::H4 => self.subsection(&text, range),
            _ => {}
        }
    }

    /// A `####` heading: Parameters and Command make the section a tool.
    fn subsection(&mut self, text: &str, range: &Range<usize>) {
        let Some(o) = self.open.as_mut() else { return };
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

    /// Paragraphs before the first `####` describe the tool; one under
    /// Parameters (such as "None.") says it has none.
    fn paragraph(&mut self) {
        let Capture::Paragraph(text) = std::mem::take(&mut self.capture) else {
            return;
        };
        let Some(o) = self.open.as_mut() else { return };
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

    fn table_row(&mut self) {
        let Some(o) = self.open.as_mut().filter(|o| o.section == Section::Parameters) else {
            return;
        };
        let cells = std::mem::take(&mut self.row);
        match &mut o.block.params {
            Some(ParamsSection::Table { rows, .. }) => rows.push((cells, self.row_offset)),
            _ => {
                o.block.params = Some(ParamsSection::Table {
                    header: self.header.clone(),
                    rows: vec![(cells, self.row_offset)],
                })
            }
        }
    }

    fn table_end(&mut self) {
        // A table with a header and no rows still declares "no parameters".
        if let Some(o) = self.open.as_mut().filter(|o| o.section == Section::Parameters)
            && o.block.params.is_none()
        {
            o.block.params = Some(ParamsSection::Table {
                header: std::mem::take(&mut self.header),
                rows: Vec::new(),
            });
        }
        self.header.clear();
    }

    /// A fenced block's text starts on the line after its fence.
    fn code_start(&mut self, kind: &CodeBlockKind<'_>, range: &Range<usize>) {
        let start = match kind {
            CodeBlockKind::Fenced(_) => self.body[range.start..]
                .find('\n')
                .map_or(range.start, |i| range.start + i + 1),
            CodeBlockKind::Indented => range.start,
        };
        self.capture = Capture::Code(String::new(), start);
    }

    fn code_end(&mut self) {
        if let Capture::Code(text, offset) = std::mem::take(&mut self.capture)
            && let Some(o) = self.open.as_mut().filter(|o| o.section == Section::Command)
        {
            o.block.commands.push((text, offset));
        }
    }
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
