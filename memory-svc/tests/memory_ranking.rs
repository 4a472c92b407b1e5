//! memory-svc ranking over gRPC: each test holds a few hand-written turns where one part of the
//! analysis decides the order (stemming, stopwords, the author and custom_metadata fields, the
//! neighbouring turns of a session, the query's language and the server's default one), and the
//! multilingual matching that every analysis keeps. On PostgreSQL too when `ADK_TEST_POSTGRES`
//! is set.

use adk_proto::{
    memory::v1::{
        add_session_to_memory_request::Source, delete_memory_request::Target,
        memory_service_client::MemoryServiceClient, AddEventsToMemoryRequest, AddMemoryRequest,
        AddSessionToMemoryRequest, DeleteMemoryRequest, MemoryEntry, SearchMemoryRequest,
    },
    session::v1::{part::Data, Session},
};
use adk_tests::{text_event, text_memory, ts, MemoryServer};
use tonic::{transport::Channel, Code};

/// An endpoint where nothing listens: these tests never resolve session references.
const NO_SESSION_SVC: &str = "http://127.0.0.1:9";

type Client = MemoryServiceClient<Channel>;

/// A turn: event id, author, text.
type Turn<'a> = (&'a str, &'a str, &'a str);

fn session(id: &str, turns: &[Turn<'_>]) -> Session {
    Session {
        id: id.into(),
        app_name: "app".into(),
        user_id: "u".into(),
        events: turns
            .iter()
            .zip(1..)
            .map(|(&(id, author, text), second)| {
                let mut e = text_event(author, text);
                e.id = id.into();
                e.timestamp = Some(ts(second));
                e
            })
            .collect(),
        ..Default::default()
    }
}

async fn add_session(c: &mut Client, id: &str, turns: &[Turn<'_>]) {
    c.add_session_to_memory(AddSessionToMemoryRequest {
        source: Some(Source::Session(session(id, turns))),
        generate: None,
    })
    .await
    .expect("add_session_to_memory");
}

/// A server holding `turns`, each in a session of its own (named after the turn), so that no
/// turn is the context of another.
async fn server_with(turns: &[Turn<'_>]) -> (MemoryServer, Client) {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    for turn in turns {
        add_session(&mut c, turn.0, &[*turn]).await;
    }
    (srv, c)
}

fn query(text: &str) -> SearchMemoryRequest {
    SearchMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        query: text.into(),
        ..Default::default()
    }
}

async fn search_with(c: &mut Client, req: SearchMemoryRequest) -> Vec<MemoryEntry> {
    c.search_memory(req)
        .await
        .expect("search_memory")
        .into_inner()
        .memories
}

/// The ids `text` finds, best first.
async fn ranked(c: &mut Client, text: &str) -> Vec<String> {
    ids(search_with(c, query(text)).await)
}

/// The ids `text` finds, best first, analysed in the language of the code `language`.
async fn ranked_in(c: &mut Client, text: &str, language: &str) -> Vec<String> {
    let req = SearchMemoryRequest {
        language: language.into(),
        ..query(text)
    };
    ids(search_with(c, req).await)
}

fn ids(found: Vec<MemoryEntry>) -> Vec<String> {
    found.into_iter().map(|m| m.id).collect()
}

/// The ids `text` finds, sorted (for tests about matching, not order).
async fn found(c: &mut Client, text: &str) -> Vec<String> {
    let mut ids = ranked(c, text).await;
    ids.sort();
    ids
}

fn text_of(m: &MemoryEntry) -> String {
    m.content
        .iter()
        .flat_map(|c| &c.parts)
        .filter_map(|p| match &p.data {
            Some(Data::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn stemming_finds_other_forms_of_a_word() {
    let (_srv, mut c) = server_with(&[
        ("knee", "Lena", "I injured my knee playing football"),
        ("dinner", "Lena", "I cooked dinner for my parents"),
        ("hike", "Lena", "We love hiking in the mountains"),
        ("tickets", "Marco", "Did you get the tickets?"),
    ])
    .await;
    assert_eq!(ranked(&mut c, "cooking").await, ["dinner"]);
    assert_eq!(ranked(&mut c, "hiked").await, ["hike"]);
    assert_eq!(ranked(&mut c, "injuring").await, ["knee"]);
    // The same word form is found as before.
    assert_eq!(ranked(&mut c, "cooked").await, ["dinner"]);
    assert_eq!(ranked(&mut c, "injured knee").await, ["knee"]);
    // Words the question shares with small talk do not outrank the one that matters.
    assert_eq!(
        ranked(&mut c, "When did Lena get injured?").await[0],
        "knee"
    );
}

#[tokio::test]
async fn stopwords_do_not_dominate_the_score() {
    let (_srv, mut c) = server_with(&[
        ("curry", "Priya", "I cooked a big pot of lentil curry"),
        ("smalltalk", "Sam", "What did you do?"),
        ("lentils", "user", "I made lentils with rice yesterday"),
    ])
    .await;
    assert_eq!(ranked(&mut c, "What did Priya cook?").await[0], "curry");
    // No stemming or author needed here: only the stopwords favour the small talk.
    assert_eq!(
        ranked(&mut c, "What did she say about the lentils?").await[0],
        "lentils"
    );
}

#[tokio::test]
async fn a_query_of_stopwords_only_still_finds_them() {
    let (_srv, mut c) = server_with(&[
        ("band", "user", "The Who played at the stadium"),
        ("weather", "user", "Nice weather today"),
    ])
    .await;
    assert_eq!(ranked(&mut c, "the who").await, ["band"]);
}

#[tokio::test]
async fn the_author_is_a_field_of_its_own() {
    let (_srv, mut c) = server_with(&[
        (
            "aisha",
            "Aisha",
            "I grew up by the sea, but I am afraid of deep water",
        ),
        ("omar", "Omar", "I'm afraid of spiders"),
    ])
    .await;
    // Only the author names Aisha; the shorter turn matches "afraid" as well.
    assert_eq!(
        ranked(&mut c, "What is Aisha afraid of?").await,
        ["aisha", "omar"]
    );
    assert_eq!(ranked(&mut c, "Omar").await, ["omar"]);
}

#[tokio::test]
async fn custom_metadata_string_values_are_searchable() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let fact = |id: &str, text: &str, metadata: &str| MemoryEntry {
        custom_metadata: metadata.into(),
        ..text_memory(id, "user", text)
    };
    c.add_memory(AddMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        memories: vec![
            fact(
                "tomatoes",
                "Planted tomatoes in the backyard",
                r#"{"topic": "gardening"}"#,
            ),
            fact("tea", "Prefers tea over coffee", r#"{"topic": "drinks"}"#),
        ],
        custom_metadata: String::new(),
    })
    .await
    .expect("add_memory");
    assert_eq!(ranked(&mut c, "gardening").await, ["tomatoes"]);
    assert_eq!(ranked(&mut c, "drinks").await, ["tea"]);
    let hit = &search_with(&mut c, query("gardening")).await[0];
    assert_eq!(hit.custom_metadata, r#"{"topic":"gardening"}"#);
    assert_eq!(text_of(hit), "Planted tomatoes in the backyard");
}

#[tokio::test]
async fn a_reply_is_found_by_the_words_of_the_turn_it_answers() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    add_session(&mut c, "s0", &[("z", "Sam", "Let's talk tomorrow")]).await;
    add_session(
        &mut c,
        "s1",
        &[
            ("a", "Sam", "Did you hear back after the interview?"),
            ("b", "Lena", "They offered it to me!"),
        ],
    )
    .await;
    add_session(
        &mut c,
        "s2",
        &[
            ("d", "Lena", "We signed the lease today"),
            ("e", "Sam", "Congratulations on the new flat"),
        ],
    )
    .await;
    let hits = search_with(&mut c, query("interview")).await;
    let ids: Vec<&str> = hits.iter().map(|m| m.id.as_str()).collect();
    assert!(ids.contains(&"a"), "{ids:?}");
    assert!(ids.contains(&"b"), "the reply is found: {ids:?}");
    // Context stays within its session, though "z" and "d" were ingested right next to it.
    assert!(!ids.contains(&"z") && !ids.contains(&"d"), "{ids:?}");
    let reply = hits.iter().find(|m| m.id == "b").expect("b is found");
    assert_eq!(
        text_of(reply),
        "They offered it to me!",
        "its own content only"
    );
    assert_eq!(
        (reply.author.as_str(), reply.session_id.as_str()),
        ("Lena", "s1")
    );
    // Nor do the words of the next session's first turn reach the reply.
    assert!(!ranked(&mut c, "lease").await.contains(&"b".to_owned()));
}

#[tokio::test]
async fn context_also_comes_from_events_added_to_a_session() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    let turns = session(
        "s1",
        &[
            ("a", "Sam", "Did you hear back after the interview?"),
            ("b", "Lena", "They offered it to me!"),
        ],
    );
    c.add_events_to_memory(AddEventsToMemoryRequest {
        app_name: "app".into(),
        user_id: "u".into(),
        session_id: "s1".into(),
        events: turns.events,
        custom_metadata: String::new(),
    })
    .await
    .expect("add_events_to_memory");
    assert_eq!(found(&mut c, "interview").await, ["a", "b"]);
}

#[tokio::test]
async fn the_language_of_a_query_can_be_given() {
    let (_srv, mut c) = server_with(&[
        (
            "haus",
            "Lena",
            "Wir haben letztes Jahr ein altes Haus am See gekauft",
        ),
        ("house", "Lena", "We painted the house last summer"),
    ])
    .await;
    // German Snowball: "häuser" and "haus" share the stem "haus".
    assert_eq!(ranked_in(&mut c, "Häuser", "de").await, ["haus"]);
    // English Snowball leaves "häuser" as it is: no entry has that word.
    assert!(ranked_in(&mut c, "Häuser", "en").await.is_empty());

    for bad in ["zz", "english", "d"] {
        let mut req = query("Häuser");
        req.language = bad.into();
        let err = c.search_memory(req).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad}: {err:?}");
        assert!(err.message().contains("language"), "{}", err.message());
    }
}

/// A server started with `flags` (`--default-language de`, say), holding `turns` as
/// [`server_with`] does. The flags go through the command-line parser; everything else is the
/// harness's.
async fn server_with_flags(flags: &[&str], turns: &[Turn<'_>]) -> (MemoryServer, Client) {
    let command_line = std::iter::once("memory-svc").chain(flags.iter().copied());
    let mut parsed = <memory_svc::config::Config as clap::Parser>::try_parse_from(command_line)
        .unwrap_or_else(|e| panic!("memory-svc takes {flags:?}: {e}"));
    let srv = MemoryServer::start_with(NO_SESSION_SVC, |config| {
        parsed.listen = config.listen;
        parsed.data_dir = config.data_dir.clone();
        parsed.store = config.store.clone();
        parsed.session_endpoint = config.session_endpoint.clone();
        parsed.serve = config.serve.clone();
        *config = parsed;
    })
    .await;
    let mut c = srv.client.clone();
    for turn in turns {
        add_session(&mut c, turn.0, &[*turn]).await;
    }
    (srv, c)
}

/// Text whose language detection cannot tell (a short query, a short turn) is analysed in the
/// server's default language: English unless `--default-language` says otherwise.
#[tokio::test]
async fn the_server_default_language_applies_when_detection_cannot_tell() {
    let turns = [
        (
            "haus",
            "Lena",
            "Wir haben letztes Jahr ein altes Haus am See gekauft",
        ),
        ("dinner", "Lena", "I cooked dinner for my parents"),
    ];
    let (_srv, mut c) = server_with_flags(&["--default-language", "de"], &turns).await;
    assert_eq!(ranked(&mut c, "Häuser").await, ["haus"]);

    // `none`: no stemming at all, only the word forms themselves match.
    let (_srv, mut c) = server_with_flags(&["--default-language", "none"], &turns).await;
    assert!(ranked(&mut c, "cooking").await.is_empty());
    assert_eq!(ranked(&mut c, "cooked").await, ["dinner"]);
    // The query's own language still applies.
    assert_eq!(ranked_in(&mut c, "Häuser", "de").await, ["haus"]);
}

/// `--detect-language false`: every entry and query is analysed in the default language, so a
/// Russian turn is no longer stemmed as Russian; a query that names its language still is.
#[tokio::test]
async fn without_detection_every_text_is_in_the_default_language() {
    let turns = [
        (
            "walk",
            "Lena",
            "Мы вчера весь вечер гуляли по парку и говорили о работе",
        ),
        ("dinner", "Lena", "I cooked dinner for my parents"),
    ];

    // Detected: the turn is indexed under Russian stems, which the infinitive shares.
    let (_srv, mut c) = server_with(&turns).await;
    assert_eq!(ranked_in(&mut c, "гулять", "ru").await, ["walk"]);

    let (_srv, mut c) = server_with_flags(&["--detect-language", "false"], &turns).await;
    assert!(ranked_in(&mut c, "гулять", "ru").await.is_empty());
    assert_eq!(ranked(&mut c, "гуляли").await, ["walk"]);
    // English is still stemmed: the default language applies to every text.
    assert_eq!(ranked(&mut c, "cooking").await, ["dinner"]);
}

/// A write's language is detected once, over its turns: short turns of an English conversation
/// stay English, a turn in another script (Russian) is detected on its own, and the short turns
/// of a German conversation are German, which on their own they could not be told to be.
#[tokio::test]
async fn the_language_is_detected_per_write_and_per_script() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    add_session(
        &mut c,
        "mixed",
        &[
            ("yes", "user", "Yes!"),
            ("thanks", "model", "ok, thanks"),
            (
                "walk",
                "user",
                "Мы вчера весь вечер гуляли по парку и говорили о новой работе",
            ),
            ("cooked", "model", "Cooked!"),
        ],
    )
    .await;
    // Russian stems: the infinitive finds the past tense.
    assert_eq!(ranked_in(&mut c, "гулять", "ru").await, ["walk"]);
    // English stems, in the turns and in the context of the turn before ("yes"); the Russian
    // turn's context is analysed in Russian, which keeps English words whole.
    assert_eq!(ranked_in(&mut c, "thanking", "en").await, ["thanks", "yes"]);
    assert_eq!(ranked_in(&mut c, "cooking", "en").await, ["cooked"]);

    add_session(
        &mut c,
        "german",
        &[
            (
                "dog",
                "Lena",
                "Der Hund meines Nachbarn hat gestern den ganzen Nachmittag im Garten gebellt.",
            ),
            ("houses", "Tom", "Zwei Häuser weiter!"),
        ],
    )
    .await;
    // German Snowball takes "häuser" to "haus"; English would keep it whole.
    assert_eq!(ranked_in(&mut c, "Haus", "de").await, ["houses", "dog"]);
}

#[tokio::test]
async fn multilingual_matching_is_kept() {
    let (_srv, mut c) = server_with(&[
        ("zh", "user", "我的朋友叫山田太郎"),
        ("ja", "user", "私はPythonでADKを使っています"),
        ("ko", "user", "저는 서울에서 살아요"),
        ("ru", "user", "Москва — столица России"),
        (
            "ru-long",
            "user",
            "Мы вчера долго гуляли по Москве и смотрели на старые дома",
        ),
        ("el", "user", "Η Αθήνα είναι όμορφη"),
        ("fr", "user", "Le café était délicieux"),
        ("nfd", "user", "Cafe\u{301} au lait"),
        ("en", "user", "I write Python every day"),
    ])
    .await;
    assert_eq!(found(&mut c, "太郎").await, ["zh"], "CJK by substring");
    assert_eq!(found(&mut c, "使って").await, ["ja"]);
    assert_eq!(found(&mut c, "서울").await, ["ko"]);
    assert_eq!(found(&mut c, "python").await, ["en", "ja"]);
    assert!(found(&mut c, "thon").await.is_empty(), "whole words only");
    // Each word form finds itself (whether it finds other forms too depends on the language
    // detected, which a short text may not give).
    for (word, id) in [("москва", "ru"), ("России", "ru"), ("Москве", "ru-long")]
    {
        let ids = found(&mut c, word).await;
        assert!(ids.contains(&id.to_owned()), "{word}: {ids:?}");
        assert!(ids.iter().all(|i| i.starts_with("ru")), "{word}: {ids:?}");
    }
    assert_eq!(found(&mut c, "ΑΘΉΝΑ").await, ["el"]);
    assert_eq!(found(&mut c, "délicieux").await, ["fr"]);
    assert_eq!(found(&mut c, "café").await, ["fr", "nfd"]);
}

/// An exact match of every query word is still the best match.
#[tokio::test]
async fn exact_matches_are_found_as_before() {
    let (_srv, mut c) = server_with(&[
        ("alpha", "user", "My favorite project is Project Alpha."),
        ("noted", "agent", "Noted!"),
    ])
    .await;
    assert_eq!(ranked(&mut c, "favorite project").await, ["alpha"]);
    assert_eq!(ranked(&mut c, "Project Alpha").await, ["alpha"]);
}

/// Fields and context never change what a search returns: the entry as it was stored.
#[tokio::test]
async fn results_are_the_stored_entries() {
    let srv = MemoryServer::start(NO_SESSION_SVC).await;
    let mut c = srv.client.clone();
    add_session(
        &mut c,
        "s",
        &[
            ("q", "Marco", "Which city did you move to?"),
            ("r", "Lena", "Lisbon, in March"),
        ],
    )
    .await;
    let hits = search_with(&mut c, query("Lena moved city")).await;
    let reply = hits.iter().find(|m| m.id == "r").expect("r is found");
    assert_eq!(text_of(reply), "Lisbon, in March");
    assert_eq!(reply.author, "Lena");
    assert_eq!(reply.timestamp, Some(ts(2)));
    assert!(reply.score > 0.0);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
}

/// A word's entries rank alike whether it is in few entries or in many: the shorter first, then
/// the earlier, as its number of entries passes the few a store keeps beside the word's
/// document frequency (the sled store keeps up to 32 there, and the rest in blocks), as it drops
/// back under it, and after a restart. A small memory budget has the postings merged every few
/// writes rather than waiting for a merge throughout.
#[tokio::test]
async fn a_word_ranks_alike_in_few_entries_and_in_many() {
    let mut srv = MemoryServer::start_with(NO_SESSION_SVC, |config| {
        config.memory_budget = Some(64 << 10);
    })
    .await;
    let mut c = srv.client.clone();
    // Entry i: the word and i % 5 words of its own, in a session of its own.
    let text = |i: usize| {
        let own = (0..i % 5).map(|k| format!(" own{}", char::from(b'a' + k as u8)));
        format!("kiwi{}", own.map(|w| format!("{w}{i}")).collect::<String>())
    };
    let mut held = Vec::new();
    let expected = |held: &[usize]| {
        let mut order = held.to_vec();
        order.sort_by_key(|&i| (i % 5, i));
        order.iter().map(|i| format!("e{i}")).collect::<Vec<_>>()
    };
    let every = || SearchMemoryRequest {
        limit: 100,
        ..query("kiwi")
    };
    for (from, to) in [(0, 32), (32, 45)] {
        for i in from..to {
            let id = format!("e{i}");
            add_session(&mut c, &id, &[(&id, "user", &text(i))]).await;
            held.push(i);
        }
        assert_eq!(ids(search_with(&mut c, every()).await), expected(&held));
    }
    for i in (0..45).filter(|i| i % 3 == 0) {
        c.delete_memory(DeleteMemoryRequest {
            app_name: "app".into(),
            user_id: "u".into(),
            target: Some(Target::MemoryId(format!("e{i}"))),
        })
        .await
        .expect("delete_memory");
        held.retain(|&h| h != i);
    }
    assert_eq!(held.len(), 30);
    assert_eq!(ids(search_with(&mut c, every()).await), expected(&held));
    srv = srv.restart().await;
    let mut c = srv.client.clone();
    assert_eq!(ids(search_with(&mut c, every()).await), expected(&held));
}
