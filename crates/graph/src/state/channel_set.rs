//! A small bit set of channel indexes.

/// A set of channel indexes (bit set; inline for up to 128 channels).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ChannelSet {
    low: u128,
    high: Vec<u64>,
}

impl ChannelSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `index`.
    pub fn insert(&mut self, index: usize) {
        if index < 128 {
            self.low |= 1u128 << index;
        } else {
            let i = index - 128;
            let word = i / 64;
            if self.high.len() <= word {
                self.high.resize(word + 1, 0);
            }
            self.high[word] |= 1u64 << (i % 64);
        }
    }

    /// Removes `index`.
    pub fn remove(&mut self, index: usize) {
        if index < 128 {
            self.low &= !(1u128 << index);
        } else {
            let i = index - 128;
            if let Some(word) = self.high.get_mut(i / 64) {
                *word &= !(1u64 << (i % 64));
            }
        }
    }

    /// Whether `index` is in the set.
    pub fn contains(&self, index: usize) -> bool {
        if index < 128 {
            self.low & (1u128 << index) != 0
        } else {
            let i = index - 128;
            self.high.get(i / 64).is_some_and(|w| w & (1u64 << (i % 64)) != 0)
        }
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.low == 0 && self.high.iter().all(|w| *w == 0)
    }

    /// Adds every index of `other`.
    pub fn union_with(&mut self, other: &ChannelSet) {
        self.low |= other.low;
        if self.high.len() < other.high.len() {
            self.high.resize(other.high.len(), 0);
        }
        for (a, b) in self.high.iter_mut().zip(&other.high) {
            *a |= *b;
        }
    }

    /// Whether the two sets share an index.
    pub fn intersects(&self, other: &ChannelSet) -> bool {
        self.low & other.low != 0 || self.high.iter().zip(&other.high).any(|(a, b)| a & b != 0)
    }

    /// The indexes, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let low = Bits128(self.low);
        let high = self
            .high
            .iter()
            .enumerate()
            .flat_map(|(w, bits)| Bits128(u128::from(*bits)).map(move |b| 128 + w * 64 + b));
        low.chain(high)
    }
}

/// The set bits of a word, lowest first.
struct Bits128(u128);

impl Iterator for Bits128 {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let bit = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(bit)
    }
}

impl FromIterator<usize> for ChannelSet {
    fn from_iter<T: IntoIterator<Item = usize>>(iter: T) -> Self {
        let mut set = ChannelSet::new();
        for i in iter {
            set.insert(i);
        }
        set
    }
}
