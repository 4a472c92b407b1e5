//! The filters of memory searches, listings and purges, as the console and the MCP tools take
//! them: checked here (errors name the field) and set on each request in one place, so a new
//! search option is one field of [`MemoryFilters`] and one line per request kind.
//!
//! People type metadata conditions in the CLI's text syntax ([`runner_client::filter`]); MCP
//! clients give them as JSON (see [`crate::mcp::args::Condition`]).

use adk_proto::memory::v1::{
    ListMemoriesRequest, MemoryFilter, MemoryKind, PurgeMemoriesRequest, SearchMemoryRequest,
};
use prost_types::Timestamp;
use runner_client::filter;

use crate::error::GatewayError;

/// What a search, a listing or a purge keeps; the default keeps everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryFilters {
    /// Metadata conditions and topics (`None`: no condition).
    pub filter: Option<MemoryFilter>,
    pub kind: MemoryKind,
    /// Empty: any author.
    pub author: String,
    pub after: Option<Timestamp>,
    pub before: Option<Timestamp>,
    /// Searches and listings: the memories valid at this time (`None`: now).
    pub as_of: Option<Timestamp>,
    /// Searches and listings: superseded memories too.
    pub include_superseded: bool,
}

impl MemoryFilters {
    /// The filters of a form people fill in: `conditions` one group of the text syntax per
    /// line (blank lines skipped), `topics` separated by commas, times in RFC 3339. Empty
    /// fields keep everything; errors name the form's field.
    pub fn from_text(
        conditions: &str,
        topics: &str,
        author: &str,
        after: &str,
        before: &str,
    ) -> Result<Self, GatewayError> {
        let groups: Vec<&str> = conditions
            .lines()
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .collect();
        let topics: Vec<&str> = topics
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let filter =
            filter::memory_filter(&groups, &topics).map_err(|e| GatewayError::Invalid {
                field: "filter".into(),
                why: e.to_string(),
            })?;
        Ok(Self {
            filter: Some(filter).filter(|f| *f != MemoryFilter::default()),
            kind: MemoryKind::Unspecified,
            author: author.trim().to_owned(),
            after: time("after", non_empty(after))?,
            before: time("before", non_empty(before))?,
            ..Self::default()
        })
    }

    /// These filters, keeping the memories valid at `as_of` (`None`: now), and superseded ones
    /// too with `include_superseded`.
    pub fn valid_at(self, as_of: Option<Timestamp>, include_superseded: bool) -> Self {
        Self {
            as_of,
            include_superseded,
            ..self
        }
    }

    /// `request` with these filters.
    pub fn search(self, request: SearchMemoryRequest) -> SearchMemoryRequest {
        SearchMemoryRequest {
            filter: self.filter,
            kind: self.kind.into(),
            author: self.author,
            after_timestamp: self.after,
            before_timestamp: self.before,
            as_of: self.as_of,
            include_superseded: self.include_superseded,
            ..request
        }
    }

    /// `request` with these filters.
    pub fn list(self, request: ListMemoriesRequest) -> ListMemoriesRequest {
        ListMemoriesRequest {
            filter: self.filter,
            kind: self.kind.into(),
            author: self.author,
            after_timestamp: self.after,
            before_timestamp: self.before,
            as_of: self.as_of,
            include_superseded: self.include_superseded,
            ..request
        }
    }

    /// `request` with these filters. A purge deletes what matches whatever its validity, so a
    /// validity bound is refused rather than ignored: the purge would delete more than a search
    /// or listing with the same filters shows.
    pub fn purge(
        self,
        request: PurgeMemoriesRequest,
    ) -> Result<PurgeMemoriesRequest, GatewayError> {
        let refused = if self.as_of.is_some() {
            Some("as_of")
        } else if self.include_superseded {
            Some("include_superseded")
        } else {
            None
        };
        if let Some(field) = refused {
            return Err(GatewayError::Invalid {
                field: field.into(),
                why: "a purge deletes the memories that match whatever their validity; \
                      leave it out"
                    .into(),
            });
        }
        Ok(PurgeMemoriesRequest {
            filter: self.filter,
            kind: self.kind.into(),
            author: self.author,
            after_timestamp: self.after,
            before_timestamp: self.before,
            ..request
        })
    }
}

/// `text` trimmed, unless that leaves nothing.
fn non_empty(text: &str) -> Option<&str> {
    Some(text.trim()).filter(|t| !t.is_empty())
}

/// An RFC 3339 time (`None`: no bound).
pub fn time(field: &'static str, value: Option<&str>) -> Result<Option<Timestamp>, GatewayError> {
    value
        .map(|v| {
            v.parse().map_err(|_| GatewayError::Invalid {
                field: field.into(),
                why: format!("{v:?} is not an RFC 3339 time such as 2026-01-31T00:00:00Z"),
            })
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use adk_proto::memory::v1::MetadataOperator;

    use super::*;

    #[test]
    fn text_filters_read_groups_per_line_and_topics_per_comma() {
        let f = MemoryFilters::from_text(
            "color=red, n>=3\n\n  vip?  \n",
            "pets, ,food",
            " user ",
            "2026-01-01T00:00:00Z",
            "",
        )
        .unwrap();
        let filter = f.filter.as_ref().unwrap();
        assert_eq!(filter.any_of.len(), 2);
        assert_eq!(filter.any_of[0].all_of.len(), 2);
        assert_eq!(
            filter.any_of[1].all_of[0].operator,
            MetadataOperator::Exists as i32
        );
        assert_eq!(filter.topics, ["pets", "food"]);
        assert_eq!(f.author, "user");
        assert!(f.after.is_some() && f.before.is_none());
        assert_eq!(
            MemoryFilters::from_text("", "", "", "", "").unwrap(),
            MemoryFilters::default()
        );
    }

    #[test]
    fn text_errors_name_the_field() {
        for (args, field) in [
            (["color", "", "", "", ""], "filter"),
            (["", "", "", "yesterday", ""], "after"),
            (["", "", "", "", "soon"], "before"),
        ] {
            let e = MemoryFilters::from_text(args[0], args[1], args[2], args[3], args[4])
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(&format!("{field}: ")), "{e}");
        }
    }
}
