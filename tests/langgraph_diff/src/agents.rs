//! (scenarios to come)

use crate::scenarios;

scenarios![];
