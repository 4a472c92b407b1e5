//! `adk-bench recall`: how well SearchMemory finds what a conversation said.
//!
//! Loads a corpus of conversations and questions (`bench/recall`, see its `generate.py`),
//! ingests it through the gRPC API (sessions by value with AddSessionToMemory, profile notes with
//! AddMemory) into a memory-svc it starts (release binary, port 0, embedded or `--postgres`) or one
//! at `--endpoint`, asks every question (or those of one `--split`) with SearchMemory (limit 10
//! unless `--limit` says), and reports recall@1/3/5/10 and MRR per question kind and overall
//! (see [`metrics`]), and the search latency. `--rankings FILE` writes what every search found,
//! so that fusion settings can be tried on two runs' rankings (`bench/recall/fuse.py`).

pub mod corpus;
pub mod metrics;

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, memory_service_client::MemoryServiceClient,
        AddMemoryRequest, AddSessionToMemoryRequest, MemoryEntry, SearchMemoryRequest, SearchMode,
    },
    session::v1::{part, Content, Event, Part, Session},
};
use tonic::transport::Channel;

use crate::{ctx::Ctx, load, server::Server, Result};
use corpus::{Corpus, Record, Split, Turn};
use metrics::{Scored, Summary, KS};

/// The kind of questions that share (almost) no words with their answer: keyword ranking is not
/// expected to find them, so the report also sums up every other kind on its own.
const PARAPHRASE: &str = "paraphrase";

/// What `adk-bench recall` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Directory holding `corpus.jsonl` and `questions.jsonl`.
    pub corpus: PathBuf,
    /// A running memory-svc to use instead of starting one.
    pub endpoint: Option<String>,
    /// Print every question not fully answered in the top 5, with what was found instead.
    pub misses: bool,
    /// Append the results as one JSON line to this file.
    pub json: Option<PathBuf>,
    /// The `--embedder` of the memory-svc started.
    pub embedder: Option<String>,
    /// The mode every question is asked with.
    pub mode: SearchMode,
    /// The questions asked.
    pub split: Split,
    /// Results per search (at least the largest cut-off reported, 10).
    pub limit: i32,
    /// Write every question's ranked result ids to this file, one JSON line each.
    pub rankings: Option<PathBuf>,
}

/// A mode as `--mode` names it.
pub fn parse_mode(name: &str) -> Result<SearchMode> {
    // Auto is the unspecified mode: the server picks.
    let proto_name = match name.to_uppercase().as_str() {
        "AUTO" => "UNSPECIFIED".to_owned(),
        other => other.to_owned(),
    };
    SearchMode::from_str_name(&format!("SEARCH_MODE_{proto_name}")).ok_or_else(|| {
        format!("--mode {name:?}: expected auto, keyword, semantic or hybrid").into()
    })
}

/// The outcome of one question.
#[derive(Debug, Clone)]
pub struct Asked {
    /// Index into [`Corpus::questions`].
    pub question: usize,
    /// Result ids, best first.
    pub ranked: Vec<String>,
    /// Their scores.
    pub scores: Vec<f64>,
    pub scored: Scored,
    pub latency: Duration,
}

pub async fn run(ctx: &Ctx, opts: &Options) -> Result<()> {
    let mut corpus = Corpus::load(&opts.corpus)?;
    corpus.keep(opts.split)?;
    let (server, url, backend) = match &opts.endpoint {
        Some(url) => (None, url.clone(), format!("memory-svc at {url}")),
        None => {
            let embedder: Vec<&str> = match &opts.embedder {
                Some(e) => vec!["--embedder", e],
                None => Vec::new(),
            };
            let server = Server::spawn(ctx, "memory-svc", &embedder).await?;
            let url = format!("http://{}", server.addr);
            let store = if ctx.postgres.is_some() {
                "PostgreSQL"
            } else {
                "redb"
            };
            let model = opts.embedder.as_deref().unwrap_or("none");
            let mode = opts.mode.as_str_name();
            let backend = format!("memory-svc on {store}, embedder {model}, {mode}");
            (Some(server), url, backend)
        }
    };
    let mut client = MemoryServiceClient::new(Channel::from_shared(url)?.connect().await?);
    // A fresh app per run: an external server may hold earlier runs, whose entries (and
    // statistics, kept per app and user) must not mix with this one's.
    let app = format!(
        "recall-{}",
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)?
            .as_secs()
    );
    println!(
        "# recall: {} ({} users, {} turns, {} questions), {backend}, app {app}",
        opts.corpus.display(),
        users(&corpus),
        corpus.turns(),
        corpus.questions.len()
    );
    let t = Instant::now();
    let entries = ingest(&mut client, &app, &corpus).await?;
    println!(
        "ingested {entries} entries in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let asked = ask_all(&mut client, &app, &corpus, opts.mode, opts.limit).await?;
    if let Some(path) = &opts.rankings {
        write_rankings(path, &corpus, &asked)?;
    }
    if opts.misses {
        print_misses(&corpus, &asked);
    }
    let results = Results::of(&corpus, &asked);
    results.print();
    if let Some(path) = &opts.json {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        writeln!(f, "{}", results.json(&backend))?;
    }
    if let Some(server) = server {
        server.stop().await;
    }
    Ok(())
}

/// The texts of every turn and memory entry of the corpus in `dir`, in corpus order.
pub fn turns(dir: &Path) -> Result<Vec<String>> {
    let corpus = Corpus::load(dir)?;
    Ok(corpus
        .records
        .into_iter()
        .flat_map(|record| match record {
            Record::Session { events, .. } => events,
            Record::Memories { memories, .. } => memories,
        })
        .map(|turn| turn.text)
        .collect())
}

fn users(corpus: &Corpus) -> usize {
    let mut users: Vec<&str> = corpus.questions.iter().map(|q| q.user.as_str()).collect();
    users.sort_unstable();
    users.dedup();
    users.len()
}

/// Writes the corpus into `app`; returns the number of entries memory-svc reports written.
pub async fn ingest(
    client: &mut MemoryServiceClient<Channel>,
    app: &str,
    corpus: &Corpus,
) -> Result<usize> {
    let mut entries = 0;
    for record in &corpus.records {
        match record {
            Record::Session {
                user,
                session_id,
                events,
            } => {
                let session = Session {
                    id: session_id.clone(),
                    app_name: app.into(),
                    user_id: user.clone(),
                    events: events.iter().map(event).collect::<Result<_>>()?,
                    ..Default::default()
                };
                let reply = client
                    .add_session_to_memory(AddSessionToMemoryRequest {
                        source: Some(Source::Session(session)),
                        generate: None,
                    })
                    .await?
                    .into_inner();
                if reply.entries as usize != events.len() {
                    return Err(format!(
                        "session {session_id}: {} entries for {} events",
                        reply.entries,
                        events.len()
                    )
                    .into());
                }
                entries += events.len();
            }
            Record::Memories { user, memories } => {
                let memories = memories.iter().map(entry).collect::<Result<Vec<_>>>()?;
                let reply = client
                    .add_memory(AddMemoryRequest {
                        app_name: app.into(),
                        user_id: user.clone(),
                        memories,
                        custom_metadata: String::new(),
                    })
                    .await?
                    .into_inner();
                entries += reply.ids.len();
            }
        }
    }
    Ok(entries)
}

fn content(text: &str) -> Content {
    Content {
        role: Some("user".into()),
        parts: vec![Part {
            data: Some(part::Data::Text(text.to_owned())),
            ..Default::default()
        }],
    }
}

fn timestamp(turn: &Turn) -> Result<prost_types::Timestamp> {
    turn.timestamp
        .parse()
        .map_err(|e| format!("turn {}: timestamp {:?}: {e}", turn.id, turn.timestamp).into())
}

fn event(turn: &Turn) -> Result<Event> {
    Ok(Event {
        id: turn.id.clone(),
        author: turn.author.clone(),
        content: Some(content(&turn.text)),
        timestamp: Some(timestamp(turn)?),
        ..Default::default()
    })
}

fn entry(turn: &Turn) -> Result<MemoryEntry> {
    Ok(MemoryEntry {
        id: turn.id.clone(),
        author: turn.author.clone(),
        content: Some(content(&turn.text)),
        timestamp: Some(timestamp(turn)?),
        custom_metadata: turn
            .custom_metadata
            .as_ref()
            .map(|m| serde_json::Value::Object(m.clone()).to_string())
            .unwrap_or_default(),
        ..Default::default()
    })
}

/// Asks every question of the corpus, one at a time.
pub async fn ask_all(
    client: &mut MemoryServiceClient<Channel>,
    app: &str,
    corpus: &Corpus,
    mode: SearchMode,
    limit: i32,
) -> Result<Vec<Asked>> {
    let mut asked = Vec::with_capacity(corpus.questions.len());
    for (i, q) in corpus.questions.iter().enumerate() {
        let t = Instant::now();
        let reply = client
            .search_memory(SearchMemoryRequest {
                app_name: app.into(),
                user_id: q.user.clone(),
                query: q.question.clone(),
                limit,
                mode: mode.into(),
                ..Default::default()
            })
            .await?
            .into_inner();
        let latency = t.elapsed();
        let (ranked, scores): (Vec<String>, Vec<f64>) =
            reply.memories.into_iter().map(|m| (m.id, m.score)).unzip();
        asked.push(Asked {
            question: i,
            scored: metrics::score(&ranked, &q.answers),
            ranked,
            scores,
            latency,
        });
    }
    Ok(asked)
}

/// The figures of one run.
#[derive(Debug)]
pub struct Results {
    pub kinds: Vec<(String, Summary)>,
    pub all: Summary,
    /// Every question but the paraphrases.
    pub keyword: Summary,
    pub p50: Duration,
    pub p99: Duration,
}

impl Results {
    pub fn of(corpus: &Corpus, asked: &[Asked]) -> Self {
        let kind_of = |a: &Asked| corpus.questions[a.question].kind.as_str();
        let (kinds, all) = metrics::by_kind(asked.iter().map(|a| (kind_of(a), &a.scored)));
        let keyword = Summary::of(
            asked
                .iter()
                .filter(|a| kind_of(a) != PARAPHRASE)
                .map(|a| &a.scored),
        );
        let mut hist = load::new_hist();
        for a in asked {
            load::record(&mut hist, a.latency);
        }
        Self {
            kinds: kinds.into_iter().map(|(k, s)| (k.to_owned(), s)).collect(),
            all,
            keyword,
            p50: Duration::from_micros(hist.value_at_quantile(0.50)),
            p99: Duration::from_micros(hist.value_at_quantile(0.99)),
        }
    }

    pub fn print(&self) {
        println!();
        println!("| kind | questions | recall@1 | recall@3 | recall@5 | recall@10 | MRR |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        let row = |name: &str, s: &Summary| {
            let [r1, r3, r5, r10] = s.recall;
            println!(
                "| {name} | {} | {r1:.3} | {r3:.3} | {r5:.3} | {r10:.3} | {:.3} |",
                s.questions, s.mrr
            );
        };
        for (kind, s) in &self.kinds {
            row(kind, s);
        }
        row(&format!("**all but {PARAPHRASE}**"), &self.keyword);
        row("**all**", &self.all);
        println!();
        println!(
            "SearchMemory latency over {} searches: p50 {:.3} ms, p99 {:.3} ms",
            self.all.questions,
            self.p50.as_secs_f64() * 1e3,
            self.p99.as_secs_f64() * 1e3
        );
    }

    fn json(&self, backend: &str) -> serde_json::Value {
        let summary = |s: &Summary| {
            let mut o = serde_json::Map::new();
            o.insert("questions".into(), s.questions.into());
            for (k, r) in KS.iter().zip(s.recall) {
                o.insert(format!("recall@{k}"), r.into());
            }
            o.insert("mrr".into(), s.mrr.into());
            serde_json::Value::Object(o)
        };
        serde_json::json!({
            "scenario": "recall",
            "backend": backend,
            "kinds": self.kinds.iter().map(|(k, s)| (k.clone(), summary(s))).collect::<serde_json::Map<_, _>>(),
            "all": summary(&self.all),
            "all_but_paraphrase": summary(&self.keyword),
            "search_p50_us": self.p50.as_micros() as u64,
            "search_p99_us": self.p99.as_micros() as u64,
            "loadavg": load::loadavg(),
        })
    }
}

/// One JSON line per question: its id, kind, answers, and the result ids found, best first,
/// with their scores.
fn write_rankings(path: &std::path::Path, corpus: &Corpus, asked: &[Asked]) -> Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for a in asked {
        let q = &corpus.questions[a.question];
        let line = serde_json::json!({
            "id": q.id, "kind": q.kind, "answers": q.answers, "ranked": a.ranked,
            "scores": a.scores,
        });
        writeln!(f, "{line}")?;
    }
    f.flush()?;
    Ok(())
}

/// Every question with an answer turn outside the top 5: the answer and the top 3 found.
fn print_misses(corpus: &Corpus, asked: &[Asked]) {
    let text = |id: &str| corpus.texts.get(id).map_or("?", String::as_str);
    for a in asked.iter().filter(|a| a.scored.recall[2] < 1.0) {
        let q = &corpus.questions[a.question];
        println!("\nMISS {} [{}] {:?}", q.id, q.kind, q.question);
        for id in &q.answers {
            let rank = a.ranked.iter().position(|r| r == id);
            let rank = rank.map_or("-".to_owned(), |p| (p + 1).to_string());
            println!("  answer (rank {rank}) {id}: {}", text(id));
        }
        for (n, id) in a.ranked.iter().take(3).enumerate() {
            println!("  found #{} {id}: {}", n + 1, text(id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole harness through gRPC on a small hand-written corpus, against memory-svc in
    /// this process (embedded, or PostgreSQL when the suites run there).
    #[tokio::test]
    async fn harness_runs_over_grpc_on_the_smoke_corpus() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("recall/smoke");
        let corpus = Corpus::load(&dir).unwrap();
        // No session-svc: sessions are sent by value.
        let server = adk_tests::MemoryServer::start("http://127.0.0.1:1").await;
        let mut client = server.client.clone();
        let entries = ingest(&mut client, "smoke", &corpus).await.unwrap();
        assert_eq!(entries, corpus.turns());
        let asked = ask_all(&mut client, "smoke", &corpus, SearchMode::Unspecified, 10)
            .await
            .unwrap();
        assert_eq!(asked.len(), corpus.questions.len());
        let find = |id: &str| {
            asked
                .iter()
                .find(|a| corpus.questions[a.question].id == id)
                .unwrap()
        };
        // Worded like its answer, which no other turn shares: first.
        assert_eq!(find("exact").scored.recall, [1.0; 4]);
        assert_eq!(find("exact").ranked[0], "ana-s1-t3");
        // An AddMemory note is searchable like a turn.
        assert_eq!(find("note").ranked[0], "ana-note-1");
        // Only the other user holds the words: nothing of this user's is found.
        assert!(find("other-user").ranked.is_empty());
        assert_eq!(find("other-user").scored.reciprocal_rank, 0.0);
        let results = Results::of(&corpus, &asked);
        assert_eq!(results.all.questions, corpus.questions.len());
        assert_eq!(results.keyword.questions, corpus.questions.len() - 1);
        assert_eq!(
            results
                .kinds
                .iter()
                .map(|(k, s)| (k.as_str(), s.questions))
                .collect::<Vec<_>>(),
            [
                ("adjacent", 1),
                ("note", 1),
                ("paraphrase", 1),
                ("single_hop", 2)
            ]
        );
        assert!(results.p50 > Duration::ZERO && results.p99 >= results.p50);
    }
}
