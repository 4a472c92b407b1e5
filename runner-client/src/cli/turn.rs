//! `chat` and `run`: build the runner the flags describe, then drive turns with it.

use std::{io::IsTerminal, sync::Arc};

use runner_client::{
    agents::{OpenAiAgent, OpenAiConfig, RecallAgent},
    json, user_text, Agent, Runner,
};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_stream::StreamExt;

use super::{
    output::{self, TurnPrinter},
    AgentArgs, AgentKind, Cli, CliError,
};

/// The runner, the user and the session that `chat` / `run` talk in.
struct Conversation {
    runner: Runner,
    user: String,
    session: String,
}

impl Conversation {
    fn new(cli: &Cli, args: &AgentArgs) -> Result<Self, CliError> {
        let runner = Runner::new(cli.app.clone(), agent(args)?, cli.sessions()?)
            .with_memory(cli.memory()?)
            .remember_sessions(args.remember)
            .generate_memories(args.generate);
        let session = match &cli.session {
            Some(session) => session.clone(),
            None => {
                let session = uuid::Uuid::new_v4().to_string();
                // On stderr: stdout may be a JSON stream.
                eprintln!("new session {session} (pass --session {session} to continue it)");
                session
            }
        };
        Ok(Self {
            runner,
            user: cli.user().to_owned(),
            session,
        })
    }

    /// One turn, printed as it happens.
    async fn turn(
        &self,
        message: &str,
        state_delta: Option<Map<String, Value>>,
        json_output: bool,
    ) -> Result<(), CliError> {
        let mut events =
            self.runner
                .run(&self.user, &self.session, user_text(message), state_delta);
        let mut printer = TurnPrinter::default();
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    printer.interrupted()?;
                    return Err(e.into());
                }
            };
            if json_output {
                output::json_line(&json::event(&event))?;
            } else {
                printer.event(&event)?;
            }
        }
        Ok(())
    }
}

/// The agent the flags choose.
fn agent(args: &AgentArgs) -> Result<Arc<dyn Agent>, CliError> {
    Ok(match args.agent {
        AgentKind::Recall => {
            let mut agent = RecallAgent::new("recall");
            if let Some(key) = &args.output_key {
                agent = agent.with_output_key(key);
            }
            Arc::new(agent)
        }
        AgentKind::Openai => {
            let model = args
                .model
                .clone()
                .ok_or("--agent openai needs --model (or RUNNER_MODEL)")?;
            let api_key = std::env::var(&args.api_key_env)
                .ok()
                .filter(|key| !key.is_empty());
            Arc::new(OpenAiAgent::new(OpenAiConfig {
                name: "assistant".into(),
                endpoint: args.model_endpoint.clone(),
                model,
                api_key,
                instruction: args.instruction.clone(),
                output_key: args.output_key.clone(),
                preload_memory: args.preload_memory,
            })?)
        }
    })
}

/// `run MESSAGE`: one turn.
pub(super) async fn run(
    cli: &Cli,
    agent: &AgentArgs,
    message: &str,
    state_delta: Option<&str>,
) -> Result<(), CliError> {
    let state_delta = state_delta
        .map(|text| {
            serde_json::from_str::<Map<String, Value>>(text)
                .map_err(|e| format!("--state-delta must be a JSON object: {e}"))
        })
        .transpose()?;
    Conversation::new(cli, agent)?
        .turn(message, state_delta, cli.json)
        .await
}

/// `chat`: a turn per line read, until end of input.
pub(super) async fn chat(cli: &Cli, agent: &AgentArgs) -> Result<(), CliError> {
    let conversation = Conversation::new(cli, agent)?;
    eprintln!(
        "app {}, user {}, session {}, agent {}; Ctrl-D to quit",
        cli.app,
        conversation.user,
        conversation.session,
        conversation.runner.agent_name()
    );
    let interactive = std::io::stdin().is_terminal();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        // Prompts are for people typing; piped input gets the replies alone.
        if interactive {
            output::prompt("you> ")?;
        }
        let Some(line) = lines.next_line().await? else {
            if interactive {
                output::line("")?;
            }
            return Ok(());
        };
        let message = line.trim();
        if message.is_empty() {
            continue;
        }
        // A failed turn (say, the model endpoint is down) need not end the conversation.
        if let Err(e) = conversation.turn(message, None, cli.json).await {
            eprintln!("runner-client: {e}");
        }
    }
}
