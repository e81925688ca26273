//! The action's status as the executor writes it: every write replaces the status subresource
//! with the resourceVersion last read, so a write from a leader that lost its lease (another
//! leader wrote since) fails with a conflict instead of overwriting, and the task stops.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt as _};
use telemesh_core::action::{
    ActionPhase, ObjectRef, ReplicaChange, Step, StepState, WorkloadAction, WorkloadActionStatus,
};

use super::failure::Failure;

/// Now, as stored in status (RFC 3339, microseconds).
pub fn now() -> String {
    format!("{:.6}", jiff::Timestamp::now())
}

/// One action's object, read and written by one executor task.
pub struct Record {
    api: Api<WorkloadAction>,
    /// The object as last read or written.
    pub action: WorkloadAction,
}

/// A step as [`Record::begin`] found or recorded it.
#[derive(Debug, Clone)]
pub struct Begun {
    /// Index in `status.steps`.
    pub index: usize,
    /// Whether the step was already done (by this or a previous leader).
    pub done: bool,
    /// Whether a previous leader had started it (check the observed state before redoing).
    pub resumed: bool,
    /// The step as recorded.
    pub step: Step,
}

impl Begun {
    /// The replica change the step recorded before acting (a scale step always records one).
    pub fn replica_change(&self) -> Result<ReplicaChange, Failure> {
        self.step
            .replicas
            .ok_or_else(|| Failure::Api(format!("step {} lost its replica change", self.step.name)))
    }
}

impl Record {
    /// Reads the action fresh.
    pub async fn load(client: &Client, namespace: &str, name: &str) -> Result<Self, Failure> {
        let api = Api::<WorkloadAction>::namespaced(client.clone(), namespace);
        let action = api
            .get(name)
            .await
            .map_err(|e| Failure::Api(format!("reading WorkloadAction {namespace}/{name}: {e}")))?;
        Ok(Self { api, action })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.action.namespace().unwrap_or_default(),
            self.action.name_any()
        )
    }

    /// The status (created empty on first use).
    pub fn status(&mut self) -> &mut WorkloadActionStatus {
        self.action.status.get_or_insert_with(Default::default)
    }

    /// Writes the status as it is now.
    pub async fn save(&mut self) -> Result<(), Failure> {
        let name = self.action.name_any();
        match self
            .api
            .replace_status(&name, &PostParams::default(), &self.action)
            .await
        {
            Ok(written) => {
                self.action = written;
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Err(Failure::LostOwnership(format!(
                "WorkloadAction {name} was written by someone else meanwhile (another leader?)"
            ))),
            Err(e) => Err(Failure::Api(format!(
                "writing the status of WorkloadAction {name}: {e}"
            ))),
        }
    }

    /// The step named `name`, or records it `Started` (with what it touches and the replica
    /// change it will make, before making it) and saves.
    pub async fn begin(
        &mut self,
        name: &str,
        object: Option<ObjectRef>,
        detail: String,
        replicas: Option<ReplicaChange>,
    ) -> Result<Begun, Failure> {
        if let Some((index, step)) = self
            .status()
            .steps
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
        {
            return Ok(Begun {
                index,
                done: step.state == StepState::Done,
                resumed: step.state == StepState::Started,
                step: step.clone(),
            });
        }
        let step = Step {
            name: name.to_string(),
            state: StepState::Started,
            started_at: now(),
            finished_at: None,
            object,
            detail,
            replicas,
        };
        let status = self.status();
        status.steps.push(step.clone());
        let index = status.steps.len() - 1;
        self.save().await?;
        Ok(Begun {
            index,
            done: false,
            resumed: false,
            step,
        })
    }

    /// Records a step that only notes what was observed (it changes nothing), done at once:
    /// one write.
    pub async fn note(
        &mut self,
        name: &str,
        object: Option<ObjectRef>,
        detail: String,
    ) -> Result<(), Failure> {
        let at = now();
        self.status().steps.push(Step {
            name: name.to_string(),
            state: StepState::Done,
            started_at: at.clone(),
            finished_at: Some(at),
            object,
            detail,
            replicas: None,
        });
        self.save().await
    }

    /// Marks step `index` done (with its final detail and object, when given). It is stored by
    /// the next write: the caller's, the next step's [`Record::begin`] or the action's end.
    /// Every step writes its `begin` before it acts, so a step's end is always stored before
    /// the next step acts, and a write per step end is saved; a leader that dies before that
    /// write redoes the step, which finds its wait already over or its change already made
    /// (as after dying between an act and its record).
    pub fn finish(&mut self, index: usize, object: Option<ObjectRef>, detail: Option<String>) {
        if let Some(step) = self.status().steps.get_mut(index) {
            step.state = StepState::Done;
            step.finished_at = Some(now());
            if object.is_some() {
                step.object = object;
            }
            if let Some(detail) = detail {
                step.detail = detail;
            }
        }
    }

    /// Marks step `index` failed with why.
    pub fn fail_step(&mut self, index: usize, why: &str) {
        if let Some(step) = self.status().steps.get_mut(index) {
            step.state = StepState::Failed;
            step.finished_at = Some(now());
            step.detail = why.to_string();
        }
    }

    /// Ends the action: phase, message, the `Complete` condition, no placement.
    pub fn end(&mut self, phase: ActionPhase, message: String) {
        let generation = self.action.metadata.generation;
        let status = self.status();
        status.phase = phase;
        status.message = message.clone();
        status.placement = None;
        status.completed_at = Some(now());
        let reason = phase.as_str().to_string();
        status.conditions.retain(|c| c.type_ != "Complete");
        status.conditions.push(Condition {
            type_: "Complete".into(),
            status: "True".into(),
            reason,
            message,
            last_transition_time: Time(jiff::Timestamp::now()),
            observed_generation: generation,
        });
    }
}
