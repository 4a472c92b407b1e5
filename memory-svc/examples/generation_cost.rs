//! Model calls and tokens per generated session: memory-svc (in this process, on sled) with a
//! local stand-in for the chat model (`adk_tests::chat_model`, which counts a token per four
//! characters), one user having SESSIONS conversations of four turns, each generated from with
//! consolidation. Every extraction yields two facts: one new (added), one already known
//! (kept), so the user's memory grows by one fact per session and consolidation always has
//! candidates. See BENCHMARKS.md, "Memory generation".
//!
//! ```text
//! cargo run -p memory-svc --example generation_cost -- [SESSIONS]
//! ```

use adk_proto::{
    memory::v1::{
        generate_memories_request::Source, EventList, GenerateMemoriesRequest, GenerateOptions,
    },
    session::v1::{part::Data, Content, Event, Part},
};
use adk_tests::{
    chat_model::{completions, decisions, facts, model, prompt, requests, script, tokens},
    MemoryServer,
};

fn event(id: String, author: &str, text: String) -> Event {
    Event {
        id,
        author: author.into(),
        content: Some(Content {
            role: Some(author.into()),
            parts: vec![Part {
                data: Some(Data::Text(text)),
                ..Default::default()
            }],
        }),
        ..Default::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sessions: usize = std::env::args().nth(1).map_or(Ok(50), |n| n.parse())?;
    let (url, stand_in) = model(vec![]).await;
    let server = MemoryServer::start_with("http://127.0.0.1:1", |config| {
        config.generator = format!("openai:{url}").parse().expect("valid URL");
        config.generator_model = Some("stand-in".into());
    })
    .await;
    let mut client = server.client.clone();
    println!("session  calls  prompt tokens  completion tokens  candidates sent");
    let (mut calls, mut prompt_tokens, mut completion_tokens) = (0, 0, 0);
    for s in 0..sessions {
        let id = |t: usize| format!("s{s}-e{t}");
        let events = vec![
            event(
                id(0),
                "user",
                format!("I booked a trip to city number {s} for next month."),
            ),
            event(id(1), "model", "Noted, enjoy the trip!".into()),
            event(
                id(2),
                "user",
                "As always I want a window seat, and vegetarian meals.".into(),
            ),
            event(
                id(3),
                "model",
                "I will remember your seat and meal preferences.".into(),
            ),
        ];
        let new_fact = format!("The user plans a trip to city number {s} next month.");
        let known = "The user prefers window seats and vegetarian meals.";
        let extraction = facts(&[
            ("plans", new_fact.as_str(), &[id(0).as_str()]),
            ("preferences", known, &[id(2).as_str()]),
        ]);
        // The first session has no memories yet: nothing to consolidate with, one call.
        if s == 0 {
            script(&stand_in, vec![extraction]);
        } else {
            let consolidation = decisions(&[(0, "add", "", &new_fact), (1, "keep", "", "")]);
            script(&stand_in, vec![extraction, consolidation]);
        }
        let before = requests(&stand_in).len();
        client
            .generate_memories(GenerateMemoriesRequest {
                app_name: "bench".into(),
                user_id: "u".into(),
                source: Some(Source::Events(EventList { events })),
                options: Some(GenerateOptions {
                    wait: true,
                    ..Default::default()
                }),
            })
            .await?;
        let sent = requests(&stand_in);
        let made = &sent[before..];
        let mut session_prompt = 0;
        for request in made {
            for message in request["messages"].as_array().into_iter().flatten() {
                session_prompt += tokens(message["content"].as_str().unwrap_or_default());
            }
        }
        let session_completion: usize = completions(&stand_in)[before..].iter().sum();
        let candidates = made.get(1).map_or(0, |r| {
            prompt(r).lines().take_while(|l| !l.is_empty()).count() - 1
        });
        calls += made.len();
        prompt_tokens += session_prompt;
        completion_tokens += session_completion;
        if s < 3 || s + 1 == sessions || (s + 1) % 10 == 0 {
            println!(
                "{:>7}  {:>5}  {session_prompt:>13}  {session_completion:>17}  {candidates:>15}",
                s + 1,
                made.len()
            );
        }
    }
    println!(
        "per session: {:.2} calls, {:.0} prompt tokens, {:.0} completion tokens",
        calls as f64 / sessions as f64,
        prompt_tokens as f64 / sessions as f64,
        completion_tokens as f64 / sessions as f64
    );
    server.shutdown().await;
    Ok(())
}
