//! The loader and the inference on a tiny random-weight BERT (2 layers, 16 dimensions) written
//! into a temporary folder in the sentence-transformers layout; the real all-MiniLM-L6-v2 is
//! tested in `tests/embedder.rs`.

use std::path::{Path, PathBuf};

use candle_nn::{VarBuilder, VarMap};
use serde_json::{json, Value};
use tempfile::TempDir;

use super::*;
use crate::embed::folder::ModelFolder;

const WORDS: &[&str] = &[
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "coffee", "black", "train", "berlin",
    "leaves", "at", "nine", "how", "does", "she", "take", "her", "morning", "drink", "i", "my",
    "a", "b", "c", "d", "e", "?",
];
const HIDDEN: usize = 16;

fn bert_config() -> Value {
    json!({
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": WORDS.len(),
        "hidden_size": HIDDEN,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 32,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0
    })
}

/// A WordPiece tokenizer over [`WORDS`]; it does not lower-case (so `do_lower_case` shows).
fn tokenizer_json() -> Value {
    let vocab: serde_json::Map<String, Value> = WORDS
        .iter()
        .enumerate()
        .map(|(id, word)| (word.to_string(), json!(id)))
        .collect();
    let special = |id: usize| {
        json!({"id": id, "content": WORDS[id], "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": (0..5).map(special).collect::<Vec<_>>(),
        "normalizer": {"type": "BertNormalizer", "clean_text": true,
                       "handle_chinese_chars": true, "strip_accents": null, "lowercase": false},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}
            }
        },
        "decoder": null,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    })
}

fn pooling_json(mode: &str) -> Value {
    let on = |name: &str| json!(name == mode);
    json!({
        "word_embedding_dimension": HIDDEN,
        "pooling_mode_cls_token": on("cls"),
        "pooling_mode_mean_tokens": on("mean"),
        "pooling_mode_max_tokens": on("max"),
        "pooling_mode_mean_sqrt_len_tokens": on("mean_sqrt_len")
    })
}

fn modules_json(normalize: bool) -> Value {
    let mut modules = vec![
        json!({"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}),
        json!({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}),
    ];
    if normalize {
        modules.push(json!({"idx": 2, "name": "2", "path": "2_Normalize",
                            "type": "sentence_transformers.models.Normalize"}));
    }
    Value::Array(modules)
}

fn write(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// A complete folder: mean pooling, a Normalize module, max_seq_length 16.
fn tiny_model() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    write(&path.join("config.json"), &bert_config());
    write(&path.join("tokenizer.json"), &tokenizer_json());
    write(&path.join("1_Pooling/config.json"), &pooling_json("mean"));
    write(&path.join("modules.json"), &modules_json(true));
    write(
        &path.join("sentence_bert_config.json"),
        &json!({"max_seq_length": 16, "do_lower_case": false}),
    );
    // Random weights under BERT's tensor names: loading the model from a VarMap creates them.
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let config: BertConfig = serde_json::from_value(bert_config()).unwrap();
    BertModel::load(vb, &config).unwrap();
    varmap.save(path.join("model.safetensors")).unwrap();
    dir
}

async fn embed(embedder: &LocalEmbedder, texts: &[&str]) -> Vec<Vec<f32>> {
    let texts = texts.iter().map(|t| t.to_string()).collect();
    embedder.embed(texts).await.unwrap()
}

fn assert_close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    let worst = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(worst < 1e-5, "vectors differ by {worst}: {a:?} vs {b:?}");
}

fn load_error_about(dir: &Path) -> (PathBuf, String) {
    match LocalEmbedder::load(dir) {
        Err(EmbedError::Load { path, reason }) => (path, reason),
        other => panic!("expected a load error, got {other:?}"),
    }
}

#[tokio::test]
async fn embeds_unit_vectors_of_the_model_dimension() {
    let dir = tiny_model();
    let embedder = LocalEmbedder::load(dir.path()).unwrap();
    assert_eq!(embedder.identity().dimension, HIDDEN);
    assert!(embedder.identity().fingerprint.starts_with("sha256:"));
    let vectors = embed(&embedder, &["the coffee", "the train at nine", ""]).await;
    assert_eq!(vectors.len(), 3);
    for v in &vectors {
        assert_eq!(v.len(), HIDDEN);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
    assert_ne!(vectors[0], vectors[1]);
    let again = embed(&embedder, &["the coffee", "the train at nine", ""]).await;
    assert_eq!(again, vectors, "same input, same vectors");
}

#[tokio::test]
async fn a_batch_gives_each_text_its_single_vector() {
    let dir = tiny_model();
    let embedder = LocalEmbedder::load(dir.path()).unwrap();
    // More texts than one batch, of many lengths: padding and reordering must not show.
    let words = ["how", "does", "she", "take", "her", "morning", "drink", "?"];
    let texts: Vec<String> = (0..(BATCH + 9))
        .map(|i| words[..1 + i % words.len()].join(" "))
        .collect();
    let together = embedder.embed(texts.clone()).await.unwrap();
    for (text, vector) in texts.iter().zip(&together) {
        let alone = embedder.embed(vec![text.clone()]).await.unwrap();
        assert_close(&alone[0], vector);
    }
}

#[tokio::test]
async fn inputs_are_cut_at_max_seq_length() {
    let dir = tiny_model();
    let sbert = dir.path().join("sentence_bert_config.json");
    write(&sbert, &json!({"max_seq_length": 4}));
    let embedder = LocalEmbedder::load(dir.path()).unwrap();
    // [CLS] a b [SEP]: the rest is cut.
    let v = embed(&embedder, &["a b", "a b c d e", "a c"]).await;
    assert_close(&v[0], &v[1]);
    assert_ne!(v[0], v[2]);
    // Longer than the position table (32) without max_seq_length: cut there, no failure.
    std::fs::remove_file(&sbert).unwrap();
    let embedder = LocalEmbedder::load(dir.path()).unwrap();
    let long = vec!["a b c d e ".repeat(20)];
    assert_eq!(embedder.embed(long).await.unwrap()[0].len(), HIDDEN);
}

#[tokio::test]
async fn do_lower_case_lowers_the_input() {
    let dir = tiny_model();
    let embedder = LocalEmbedder::load(dir.path()).unwrap();
    let v = embed(&embedder, &["The COFFEE", "the coffee"]).await;
    assert_ne!(v[0], v[1], "the tokenizer alone keeps case");
    let sbert = json!({"max_seq_length": 16, "do_lower_case": true});
    write(&dir.path().join("sentence_bert_config.json"), &sbert);
    let embedder = LocalEmbedder::load(dir.path()).unwrap();
    let v = embed(&embedder, &["The COFFEE", "the coffee"]).await;
    assert_close(&v[0], &v[1]);
}

#[tokio::test]
async fn the_pooling_mode_is_the_folders() {
    let dir = tiny_model();
    let mut seen: Vec<(Vec<f32>, String)> = Vec::new();
    for mode in ["mean", "cls", "max", "mean_sqrt_len"] {
        write(
            &dir.path().join("1_Pooling/config.json"),
            &pooling_json(mode),
        );
        assert_eq!(ModelFolder::read(dir.path()).unwrap().pooling.name(), mode);
        let embedder = LocalEmbedder::load(dir.path()).unwrap();
        let vector = embed(&embedder, &["she takes her coffee black"])
            .await
            .remove(0);
        seen.push((vector, embedder.identity().fingerprint.clone()));
    }
    // Mean and mean/sqrt(len) differ only in scale, gone once normalised; the others differ.
    assert_close(&seen[0].0, &seen[3].0);
    assert_ne!(seen[0].0, seen[1].0);
    assert_ne!(seen[0].0, seen[2].0);
    assert_ne!(seen[1].0, seen[2].0);
    // Every setting that changes vectors changes the fingerprint.
    let prints: std::collections::HashSet<_> = seen.iter().map(|(_, f)| f).collect();
    assert_eq!(prints.len(), 4);
}

#[test]
fn pooling_uses_real_tokens_only() {
    let tokens = vec![vec![1.0, -2.0], vec![3.0, 4.0], vec![100.0, 100.0]];
    let mask = [1, 1, 0];
    assert_eq!(pool(Pooling::Cls, &tokens, &mask), vec![1.0, -2.0]);
    assert_eq!(pool(Pooling::Mean, &tokens, &mask), vec![2.0, 1.0]);
    assert_eq!(pool(Pooling::Max, &tokens, &mask), vec![3.0, 4.0]);
    let root2 = 2f32.sqrt();
    assert_eq!(
        pool(Pooling::MeanSqrtLen, &tokens, &mask),
        vec![4.0 / root2, 2.0 / root2]
    );
}

#[test]
fn modules_json_says_whether_the_model_normalises() {
    let dir = tiny_model();
    assert!(ModelFolder::read(dir.path()).unwrap().normalize);
    write(&dir.path().join("modules.json"), &modules_json(false));
    assert!(!ModelFolder::read(dir.path()).unwrap().normalize);
    // Without modules.json: encoder at the top, pooling in 1_Pooling, no Normalize.
    std::fs::remove_file(dir.path().join("modules.json")).unwrap();
    let folder = ModelFolder::read(dir.path()).unwrap();
    assert!(!folder.normalize);
    assert_eq!(folder.pooling, Pooling::Mean);
    assert_eq!(folder.max_seq_length, Some(16));
    LocalEmbedder::load(dir.path()).unwrap();
}

#[test]
fn missing_files_are_named() {
    let dir = tiny_model();
    for file in [
        "model.safetensors",
        "tokenizer.json",
        "config.json",
        "1_Pooling/config.json",
    ] {
        let dir = tiny_model();
        let path = dir.path().join(file);
        std::fs::remove_file(&path).unwrap();
        let (named, reason) = load_error_about(dir.path());
        assert_eq!(named, path, "{reason}");
    }
    let missing = dir.path().join("nowhere");
    assert_eq!(load_error_about(&missing).0, missing);
}

#[test]
fn broken_files_are_named_with_the_reason() {
    let cases: &[(&str, &[u8], &str)] = &[
        ("model.safetensors", b"not safetensors", ""),
        ("tokenizer.json", b"{\"model\": 3}", ""),
        ("config.json", b"{\"hidden_size\": \"big\"}", ""),
        ("modules.json", b"[", ""),
        ("1_Pooling/config.json", b"{}", "no pooling mode"),
        (
            "1_Pooling/config.json",
            br#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}"#,
            "several pooling modes",
        ),
        (
            "1_Pooling/config.json",
            br#"{"pooling_mode_lasttoken": true}"#,
            "not supported",
        ),
    ];
    for (file, content, expected) in cases {
        let dir = tiny_model();
        let path = dir.path().join(file);
        std::fs::write(&path, content).unwrap();
        let (named, reason) = load_error_about(dir.path());
        assert_eq!(named, path, "{reason}");
        assert!(reason.contains(expected), "{file}: {reason}");
        let message = LocalEmbedder::load(dir.path()).unwrap_err().to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
    }
}

#[test]
fn unsupported_models_are_refused_at_load() {
    let dir = tiny_model();
    let mut modules = modules_json(true);
    modules.as_array_mut().unwrap().insert(
        2,
        json!({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}),
    );
    write(&dir.path().join("modules.json"), &modules);
    let (named, reason) = load_error_about(dir.path());
    assert_eq!(named, dir.path().join("modules.json"));
    assert!(
        reason.contains("sentence_transformers.models.Dense"),
        "{reason}"
    );

    let dir = tiny_model();
    let mut config = bert_config();
    config["model_type"] = json!("t5");
    write(&dir.path().join("config.json"), &config);
    let (named, reason) = load_error_about(dir.path());
    assert_eq!(named, dir.path().join("config.json"));
    assert!(reason.contains("\"t5\""), "{reason}");

    // Weights that do not match the config: a third layer the file does not have.
    let dir = tiny_model();
    let mut config = bert_config();
    config["num_hidden_layers"] = json!(3);
    write(&dir.path().join("config.json"), &config);
    let (named, reason) = load_error_about(dir.path());
    assert_eq!(named, dir.path().join("model.safetensors"), "{reason}");
}
