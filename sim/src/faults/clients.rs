//! Requests per client (by `User-Agent`) and what each got: served, refused by an outage, or
//! throttled. Bounded: past [`MAX_CLIENTS`] distinct agents the rest are counted together, so
//! a long-running dev cluster cannot grow the table without limit.

use std::collections::BTreeMap;

use serde::Serialize;

use super::admission::Admission;

/// Distinct clients counted one by one; later ones share [`OTHERS`].
pub const MAX_CLIENTS: usize = 1_000;

/// Where clients past [`MAX_CLIENTS`] are counted.
pub const OTHERS: &str = "(others)";

/// Where requests without a `User-Agent` are counted.
pub const UNNAMED: &str = "(none)";

/// Longest `User-Agent` kept; longer ones are cut (on a character boundary).
const MAX_AGENT_BYTES: usize = 256;

/// One client's requests by what they got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClientCounts {
    /// Answered normally.
    pub served: u64,
    /// Closed unanswered by an outage.
    pub refused: u64,
    /// Answered 429 or 5xx by throttling.
    pub throttled: u64,
}

impl ClientCounts {
    /// Every request, whatever it got.
    pub fn total(&self) -> u64 {
        self.served + self.refused + self.throttled
    }

    /// Requests since `earlier` (an older snapshot of the same client).
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            served: self.served.saturating_sub(earlier.served),
            refused: self.refused.saturating_sub(earlier.refused),
            throttled: self.throttled.saturating_sub(earlier.throttled),
        }
    }
}

/// The table.
#[derive(Debug, Default)]
pub struct Clients {
    by_agent: BTreeMap<String, ClientCounts>,
}

impl Clients {
    /// Counts one request of `agent` that got `admission`.
    pub fn count(&mut self, agent: &str, admission: Admission) {
        let key = self.key(agent);
        let counts = self.by_agent.entry(key).or_default();
        match admission {
            Admission::Serve => counts.served += 1,
            Admission::Refuse => counts.refused += 1,
            Admission::Throttle { .. } => counts.throttled += 1,
        }
    }

    /// A copy of the table.
    pub fn snapshot(&self) -> BTreeMap<String, ClientCounts> {
        self.by_agent.clone()
    }

    fn key(&self, agent: &str) -> String {
        let agent = if agent.is_empty() { UNNAMED } else { agent };
        let mut end = agent.len().min(MAX_AGENT_BYTES);
        while !agent.is_char_boundary(end) {
            end -= 1;
        }
        let agent = &agent[..end];
        if self.by_agent.contains_key(agent) || self.by_agent.len() < MAX_CLIENTS {
            agent.to_owned()
        } else {
            OTHERS.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_bounded() {
        let mut clients = Clients::default();
        for i in 0..MAX_CLIENTS + 5 {
            clients.count(&format!("client-{i}"), Admission::Serve);
        }
        clients.count("client-0", Admission::Refuse);
        let table = clients.snapshot();
        assert_eq!(table.len(), MAX_CLIENTS + 1);
        assert_eq!(table[OTHERS].served, 5);
        assert_eq!(table["client-0"].total(), 2);
    }

    #[test]
    fn long_agents_are_cut_on_a_character_boundary() {
        let mut clients = Clients::default();
        clients.count(&"é".repeat(200), Admission::Serve);
        let key = clients.snapshot().into_keys().next().unwrap_or_default();
        assert_eq!(key.len(), MAX_AGENT_BYTES);
    }
}
