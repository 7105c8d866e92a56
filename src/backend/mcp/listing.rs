//! An upstream's tools, prompts and resources, listed page by page within
//! bounds (`docs/gateway.md`, "Bounds"). A server decides how many pages
//! it sends and how large each is: followed for as long as it gave a
//! `nextCursor`, one grew skilld from 48 MB to over 1 GB. Past any bound
//! the list stops, and the backend drops the server's session.

use rmcp::model::{PaginatedRequestParams, Prompt, Resource, Tool};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleClient};
use serde::Serialize;
use std::time::Duration;

/// The most pages one list may take: far more than any server's real
/// list needs, few enough that an endless one ends at once.
pub const MAX_PAGES: usize = 100;
/// The most tools a server may list: ten times the largest real servers
/// (GitHub's lists about a hundred); an agent could use no more.
pub const MAX_TOOLS: usize = 2_000;
pub const MAX_PROMPTS: usize = 1_000;
/// Resources can be many (a file server lists files), so more of them.
pub const MAX_RESOURCES: usize = 10_000;
/// The most one list may weigh, each item as JSON (cursors included).
pub const MAX_LIST_BYTES: usize = 8 * 1024 * 1024;
/// How long one list may take, all its pages.
pub const LIST_TIME: Duration = Duration::from_secs(30);

/// The bounds of one kind of list.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    /// The method's noun: `tools`, `prompts`, `resources`.
    pub list: &'static str,
    pub items: usize,
    pub pages: usize,
    pub bytes: usize,
    pub time: Duration,
}

pub(super) const TOOLS: Bounds = Bounds::of("tools", MAX_TOOLS);
pub(super) const PROMPTS: Bounds = Bounds::of("prompts", MAX_PROMPTS);
pub(super) const RESOURCES: Bounds = Bounds::of("resources", MAX_RESOURCES);

impl Bounds {
    const fn of(list: &'static str, items: usize) -> Self {
        Self {
            list,
            items,
            pages: MAX_PAGES,
            bytes: MAX_LIST_BYTES,
            time: LIST_TIME,
        }
    }
}

/// Why a list did not come whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ListError {
    /// The server failed to answer a page (an error, a lost connection).
    #[error("{list}/list failed: {why}")]
    Failed { list: &'static str, why: String },
    /// The server sent past a bound: its session is not to be kept.
    #[error(transparent)]
    Past(#[from] PastBound),
}

/// The bound a server's list went past.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum PastBound {
    #[error("its {list}/list went on past {max} pages")]
    Pages { list: &'static str, max: usize },
    #[error("its {list}/list held more than {max} {list}")]
    Items { list: &'static str, max: usize },
    #[error("its {list}/list weighed more than {} MiB", max / (1024 * 1024))]
    Bytes { list: &'static str, max: usize },
    #[error("its {list}/list took more than {} s", max.as_secs())]
    Time { list: &'static str, max: Duration },
}

/// Every tool the server lists, within [`TOOLS`].
pub(super) async fn tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, ListError> {
    all(&TOOLS, move |cursor| async move {
        let page = peer.list_tools(Some(params(cursor))).await;
        page.map(|p| (p.tools, p.next_cursor))
    })
    .await
}

/// Every prompt the server lists, within [`PROMPTS`].
pub(super) async fn prompts(peer: &Peer<RoleClient>) -> Result<Vec<Prompt>, ListError> {
    all(&PROMPTS, move |cursor| async move {
        let page = peer.list_prompts(Some(params(cursor))).await;
        page.map(|p| (p.prompts, p.next_cursor))
    })
    .await
}

/// Every resource the server lists, within [`RESOURCES`].
pub(super) async fn resources(peer: &Peer<RoleClient>) -> Result<Vec<Resource>, ListError> {
    all(&RESOURCES, move |cursor| async move {
        let page = peer.list_resources(Some(params(cursor))).await;
        page.map(|p| (p.resources, p.next_cursor))
    })
    .await
}

fn params(cursor: Option<String>) -> PaginatedRequestParams {
    PaginatedRequestParams::default().with_cursor(cursor)
}

/// Each page `page` gives (its items and the cursor of the next), from
/// the first, until one gives no cursor or a bound is passed.
pub(super) async fn all<T, F, Fut>(bounds: &Bounds, page: F) -> Result<Vec<T>, ListError>
where
    T: Serialize,
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
{
    let past_time = PastBound::Time {
        list: bounds.list,
        max: bounds.time,
    };
    tokio::time::timeout(bounds.time, pages(bounds, page))
        .await
        .unwrap_or(Err(ListError::Past(past_time)))
}

async fn pages<T, F, Fut>(bounds: &Bounds, mut page: F) -> Result<Vec<T>, ListError>
where
    T: Serialize,
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
{
    let list = bounds.list;
    let mut items = Vec::new();
    let mut bytes = 0usize;
    let mut cursor = None;
    for _ in 0..bounds.pages {
        let (got, next) = page(cursor.take()).await.map_err(|e| ListError::Failed {
            list,
            why: e.to_string(),
        })?;
        for item in got {
            if items.len() == bounds.items {
                return Err(PastBound::Items {
                    list,
                    max: bounds.items,
                }
                .into());
            }
            bytes = bytes.saturating_add(json_len(&item));
            if bytes > bounds.bytes {
                return Err(PastBound::Bytes {
                    list,
                    max: bounds.bytes,
                }
                .into());
            }
            items.push(item);
        }
        let Some(next) = next else { return Ok(items) };
        bytes = bytes.saturating_add(next.len());
        if bytes > bounds.bytes {
            return Err(PastBound::Bytes {
                list,
                max: bounds.bytes,
            }
            .into());
        }
        cursor = Some(next);
    }
    Err(PastBound::Pages {
        list,
        max: bounds.pages,
    }
    .into())
}

/// The length of `item` as JSON, counted without keeping the text.
fn json_len<T: Serialize>(item: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a value that cannot be written
    // as JSON counts as nothing, as it would be sent as nothing.
    let _ = serde_json::to_writer(&mut count, item);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const SMALL: Bounds = Bounds {
        list: "tools",
        items: 10,
        pages: 5,
        bytes: 1_000,
        time: Duration::from_secs(30),
    };

    /// Pages of `per_page` items of `text`, endless, counting the asks.
    async fn endless(
        bounds: &Bounds,
        per_page: usize,
        text: &str,
    ) -> (Result<Vec<String>, ListError>, usize) {
        let asked = Cell::new(0);
        let got = all(bounds, |_| {
            asked.set(asked.get() + 1);
            let page = vec![text.to_owned(); per_page];
            async move { Ok::<_, ServiceError>((page, Some("more".to_owned()))) }
        })
        .await;
        (got, asked.get())
    }

    #[tokio::test]
    async fn endless_pages_stop_at_the_page_bound() {
        let (got, asked) = endless(&SMALL, 0, "").await;
        assert_eq!(
            got,
            Err(PastBound::Pages {
                list: "tools",
                max: 5
            }
            .into())
        );
        assert_eq!(asked, 5);
    }

    #[tokio::test]
    async fn too_many_items_stop_the_list_before_more_are_kept() {
        let (got, asked) = endless(&SMALL, 4, "x").await;
        assert_eq!(
            got,
            Err(PastBound::Items {
                list: "tools",
                max: 10
            }
            .into())
        );
        assert_eq!(asked, 3);
        let huge_page = all(&SMALL, |_| async { Ok((vec![1; 1_000_000], None)) }).await;
        assert_eq!(
            huge_page,
            Err(PastBound::Items {
                list: "tools",
                max: 10
            }
            .into())
        );
    }

    #[tokio::test]
    async fn heavy_items_stop_at_the_byte_bound() {
        let (got, asked) = endless(&SMALL, 1, &"x".repeat(400)).await;
        assert_eq!(
            got,
            Err(PastBound::Bytes {
                list: "tools",
                max: 1_000
            }
            .into())
        );
        assert_eq!(asked, 3);
        let huge_cursor = all(&SMALL, |_| async {
            Ok((Vec::<u8>::new(), Some("c".repeat(2_000))))
        })
        .await;
        assert_eq!(
            huge_cursor,
            Err(PastBound::Bytes {
                list: "tools",
                max: 1_000
            }
            .into())
        );
    }

    #[tokio::test]
    async fn a_slow_list_stops_at_its_deadline() {
        let quick = Bounds {
            time: Duration::from_millis(300),
            ..SMALL
        };
        let started = std::time::Instant::now();
        let slow = all(&quick, |_| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok((vec![1], Some("more".to_owned())))
        })
        .await;
        assert_eq!(
            slow,
            Err(PastBound::Time {
                list: "tools",
                max: Duration::from_millis(300)
            }
            .into())
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_list_within_bounds_comes_whole_in_order() {
        let got = all(&SMALL, |cursor: Option<String>| async move {
            let at: u32 = cursor.as_deref().unwrap_or("0").parse().unwrap();
            let next = (at < 2).then(|| (at + 1).to_string());
            Ok((vec![at * 3, at * 3 + 1, at * 3 + 2], next))
        })
        .await;
        assert_eq!(got, Ok((0..9).collect::<Vec<u32>>()));
        let failed = all(&SMALL, |_| async {
            Err::<(Vec<u8>, _), _>(ServiceError::TransportClosed)
        })
        .await;
        assert_eq!(
            failed,
            Err(ListError::Failed {
                list: "tools",
                why: ServiceError::TransportClosed.to_string()
            })
        );
    }
}
