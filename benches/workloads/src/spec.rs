//! What one client runs ([`ClientSpec`]): its workload's generator
//! configuration, its seeds and the load generator's settings. A bench
//! driver hands it to an external client program (`splitkv-app-client
//! --spec JSON`), which builds the same generator an in-node client of that
//! workload builds (`splitkv_bench::workload::Workload::generator`).

use crate::api::{ApiError, TxApi};
use crate::history_gen::{HistoryGen, MicroOpSource, WorkloadConfigError, HISTORY_PROCEDURE};
use crate::list_append::{ListAppendConfig, ListAppendGenerator, LIST_ELEMENTS_MAX};
use crate::loadgen::{LoadGenConfig, RetryPolicy};
use crate::register::{RegisterConfig, RegisterGenerator};
use crate::smallbank::{Smallbank, SmallbankGenerator};
use serde::{Deserialize, Serialize};

/// A client's workload: the configuration its generator is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ClientWorkload {
    /// Smallbank (with its api).
    Smallbank {
        /// The workload.
        workload: Smallbank,
    },
    /// Elle's list-append through its shipped procedure.
    ListAppend {
        /// The run's shape.
        config: ListAppendConfig,
    },
    /// Read-write registers through their shipped procedure.
    Register {
        /// The run's shape.
        config: RegisterConfig,
    },
}

/// Why a [`ClientSpec`] cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientSpecError {
    /// Smallbank refused its parameters.
    #[error("smallbank: {0}")]
    Smallbank(#[from] crate::BadArgs),
    /// A history workload refused its parameters.
    #[error("{0}")]
    History(#[from] WorkloadConfigError),
    /// The api is not built, or not for this workload in an external client.
    #[error("{0}")]
    Api(#[from] ApiError),
    /// No transactions in flight.
    #[error("a client needs at least one transaction in flight")]
    NoInflight,
}

impl ClientWorkload {
    /// Its short name ("smallbank", "list-append", "register").
    pub fn name(&self) -> &'static str {
        match self {
            ClientWorkload::Smallbank { .. } => "smallbank",
            ClientWorkload::ListAppend { .. } => "list-append",
            ClientWorkload::Register { .. } => "register",
        }
    }

    /// The names of the procedures its generator draws, by the ids it draws
    /// (id `i` is `names[i]`): what a client resolves at connect. Empty
    /// through the `Txn` (the built-in procedure needs no name).
    pub fn procedure_names(&self) -> Vec<&'static str> {
        match self {
            ClientWorkload::Smallbank { workload } if workload.api == TxApi::Txn => Vec::new(),
            ClientWorkload::Smallbank { .. } => crate::smallbank::MIX
                .iter()
                .map(|(t, _)| t.name())
                .collect(),
            ClientWorkload::ListAppend { .. } => vec![crate::list_append::LIST_APPEND_PROCEDURE],
            ClientWorkload::Register { .. } => vec![crate::register::REGISTER_PROCEDURE],
        }
    }

    /// Checks the parameters as the workloads' constructors do (a spec
    /// from JSON did not go through them).
    ///
    /// # Errors
    /// [`ClientSpecError`] naming the first parameter refused.
    pub fn check(&self) -> Result<(), ClientSpecError> {
        match *self {
            ClientWorkload::Smallbank { workload } => {
                let checked = Smallbank::new(workload.accounts, Some(workload.hot_accounts))?;
                if checked.hot_accounts != workload.hot_accounts {
                    return Err(
                        crate::BadArgs("smallbank's hot set is outside 2..=accounts").into(),
                    );
                }
                workload.api.check_built()?;
            }
            ClientWorkload::ListAppend { config } => {
                config.shape.check(config.active_keys)?;
                if config.clients == 0 || config.clients > LIST_ELEMENTS_MAX as u64 {
                    return Err(WorkloadConfigError::Clients {
                        clients: config.clients,
                        max: LIST_ELEMENTS_MAX as u64,
                    }
                    .into());
                }
            }
            ClientWorkload::Register { config } => {
                RegisterConfig::new(config.keys, config.shape)?;
            }
        }
        Ok(())
    }
}

/// The generator of a history client (list-append or register).
pub type HistoryClientGenerator = HistoryGen<Box<dyn MicroOpSource>>;

/// One client's run (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientSpec {
    /// The workload.
    pub workload: ClientWorkload,
    /// The client's number among every client of the run (its generator's
    /// and its history processes' identity: distinct per client).
    pub client: u16,
    /// The run's seed (the generator mixes in `client`).
    pub seed: u64,
    /// Transactions kept in flight (≥ 1).
    pub inflight: usize,
    /// Attempts per transaction (the workload may cap it: history
    /// workloads make 1).
    pub max_tries: u32,
    /// Transactions to draw in all (`None`: until the run ends).
    pub budget: Option<u64>,
    /// Warm-up before the measured interval (ms).
    pub warmup_ms: u64,
    /// Length of the measured interval (ms); drawing stops at its end.
    pub run_ms: u64,
}

impl ClientSpec {
    /// Checks the spec.
    ///
    /// # Errors
    /// [`ClientSpecError`].
    pub fn check(&self) -> Result<(), ClientSpecError> {
        if self.inflight == 0 {
            return Err(ClientSpecError::NoInflight);
        }
        self.workload.check()
    }

    /// The load generator's settings: the in-node client's (seed, depth,
    /// budget, retry policy), with one attempt per transaction for the
    /// history workloads.
    pub fn loadgen_config(&self) -> LoadGenConfig {
        let max_tries = match self.workload {
            ClientWorkload::Smallbank { .. } => self.max_tries,
            _ => 1,
        };
        LoadGenConfig {
            seed: self.seed,
            inflight_max: self.inflight,
            budget: self.budget,
            record: false,
            retry: RetryPolicy {
                max_tries,
                ..RetryPolicy::default()
            },
        }
    }

    /// Smallbank's generator, if this is Smallbank.
    pub fn smallbank_generator(&self) -> Option<SmallbankGenerator> {
        match self.workload {
            ClientWorkload::Smallbank { workload } => {
                Some(SmallbankGenerator::new(workload, self.client, self.seed))
            }
            _ => None,
        }
    }

    /// A history workload's recording generator, if this is one.
    pub fn history_generator(&self) -> Option<HistoryClientGenerator> {
        let source: Box<dyn MicroOpSource> = match self.workload {
            ClientWorkload::Smallbank { .. } => return None,
            ClientWorkload::ListAppend { config } => Box::new(ListAppendGenerator::new(
                config,
                self.client as u64,
                self.seed,
            )),
            ClientWorkload::Register { config } => Box::new(RegisterGenerator::new(
                config,
                self.client as u64,
                self.seed,
            )),
        };
        Some(HistoryGen::for_client(
            source,
            HISTORY_PROCEDURE,
            self.client,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history_gen::TxShape;

    fn spec(workload: ClientWorkload) -> ClientSpec {
        ClientSpec {
            workload,
            client: 2,
            seed: 7,
            inflight: 8,
            max_tries: 10,
            budget: None,
            warmup_ms: 0,
            run_ms: 100,
        }
    }

    #[test]
    fn specs_round_trip_as_json_and_build_their_generators() {
        let sb = spec(ClientWorkload::Smallbank {
            workload: Smallbank::new(100, None).unwrap(),
        });
        let back: ClientSpec = serde_json::from_str(&serde_json::to_string(&sb).unwrap()).unwrap();
        assert_eq!(back, sb);
        assert!(back.check().is_ok());
        assert_eq!(back.workload.procedure_names().len(), 6);
        assert!(back.smallbank_generator().is_some() && back.history_generator().is_none());
        assert_eq!(back.loadgen_config().retry.max_tries, 10);
        let reg = spec(ClientWorkload::Register {
            config: RegisterConfig::new(10, TxShape::Mixed).unwrap(),
        });
        assert_eq!(reg.workload.procedure_names(), ["register"]);
        assert!(reg.history_generator().is_some());
        assert_eq!(reg.loadgen_config().retry.max_tries, 1, "one attempt");
    }

    #[test]
    fn bad_parameters_from_json_are_refused() {
        let mut w = Smallbank::new(100, None).unwrap();
        w.accounts = 1;
        assert!(matches!(
            spec(ClientWorkload::Smallbank { workload: w }).check(),
            Err(ClientSpecError::Smallbank(_))
        ));
        let mut c = RegisterConfig::new(10, TxShape::Mixed).unwrap();
        c.keys = 0;
        assert!(spec(ClientWorkload::Register { config: c })
            .check()
            .is_err());
        let mut s = spec(ClientWorkload::Register {
            config: RegisterConfig::new(10, TxShape::Mixed).unwrap(),
        });
        s.inflight = 0;
        assert!(matches!(s.check(), Err(ClientSpecError::NoInflight)));
    }
}
