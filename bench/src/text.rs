//! Deterministic synthetic text: a 20,000-word vocabulary (the 40 most frequent words are common
//! English ones, the rest made of syllables) drawn with a Zipf(1.0) distribution, like natural
//! language. Same seed, same text, on every run.

const COMMON: [&str; 40] = [
    "the", "i", "to", "and", "a", "of", "you", "is", "my", "it", "in", "that", "what", "for", "me",
    "on", "with", "project", "was", "we", "this", "be", "have", "can", "do", "your", "are", "not",
    "at", "about", "favorite", "please", "from", "like", "will", "an", "so", "how", "user", "time",
];
const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "ve", "den", "gar", "sol", "bri", "tun", "mo",
    "zen", "qua", "fel", "dor", "pix", "lam", "cor", "vin", "hes",
];
const VOCAB: usize = 20_000;

/// Kinds of SearchMemory queries.
#[derive(Debug, Clone, Copy)]
pub enum QueryClass {
    /// Two words of frequency rank 1,000..20,000 (each in well under 1% of entries).
    Rare,
    /// A question: one very common word, one of rank 40..400, two of rank 400..20,000.
    Mixed,
    /// Three of the 20 most common words (each in a large share of all entries).
    Common,
}

impl QueryClass {
    pub const ALL: [QueryClass; 3] = [QueryClass::Rare, QueryClass::Mixed, QueryClass::Common];

    pub fn label(self) -> &'static str {
        match self {
            QueryClass::Rare => "rare-words query (2 terms)",
            QueryClass::Mixed => "mixed query (4 terms, 1 common)",
            QueryClass::Common => "common-words query (3 terms)",
        }
    }
}

pub struct Corpus {
    words: Vec<String>,
    /// Cumulative Zipf weights, normalised to 1.
    cdf: Vec<f64>,
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = splitmix(self.0);
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo) as u64) as usize
    }
}

impl Corpus {
    pub fn new() -> Self {
        let mut words: Vec<String> = COMMON.iter().map(|w| w.to_string()).collect();
        let mut i = 0usize;
        while words.len() < VOCAB {
            // Words of 2-4 syllables, distinct by construction (base-24 digits plus length).
            let mut n = i;
            let mut w = String::new();
            loop {
                w.push_str(SYLLABLES[n % SYLLABLES.len()]);
                n /= SYLLABLES.len();
                if n == 0 {
                    break;
                }
            }
            if w.len() > 3 {
                words.push(w);
            }
            i += 1;
        }
        let mut cdf = Vec::with_capacity(VOCAB);
        let mut sum = 0.0;
        for r in 0..VOCAB {
            sum += 1.0 / (r as f64 + 1.0);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Self { words, cdf }
    }

    fn zipf(&self, rng: &mut Rng) -> &str {
        let u = rng.unit();
        let i = self.cdf.partition_point(|&c| c < u).min(VOCAB - 1);
        &self.words[i]
    }

    /// Natural-looking text of about `bytes` bytes.
    pub fn text_of_bytes(&self, seed: u64, bytes: usize) -> String {
        let mut rng = Rng(seed ^ 0xE7E7);
        let mut s = String::with_capacity(bytes + 16);
        while s.len() < bytes {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(self.zipf(&mut rng));
        }
        s
    }

    /// The text of memory entry `i`: 12-40 words (about 60-200 bytes), a chat turn.
    pub fn memory_text(&self, i: u64) -> String {
        let mut rng = Rng(i.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let n = rng.range(12, 41);
        let mut s = String::with_capacity(n * 6);
        for k in 0..n {
            if k > 0 {
                s.push(' ');
            }
            s.push_str(self.zipf(&mut rng));
        }
        s
    }

    /// Query number `i` of a class.
    pub fn query(&self, class: QueryClass, i: u64) -> String {
        let mut rng = Rng(i ^ 0x5EA2C4);
        let pick = |rng: &mut Rng, lo: usize, hi: usize| self.words[rng.range(lo, hi)].clone();
        let words = match class {
            QueryClass::Rare => vec![pick(&mut rng, 1000, VOCAB), pick(&mut rng, 1000, VOCAB)],
            QueryClass::Mixed => vec![
                pick(&mut rng, 0, 20),
                pick(&mut rng, 40, 400),
                pick(&mut rng, 400, VOCAB),
                pick(&mut rng, 400, VOCAB),
            ],
            QueryClass::Common => vec![
                pick(&mut rng, 0, 20),
                pick(&mut rng, 0, 20),
                pick(&mut rng, 0, 20),
            ],
        };
        words.join(" ")
    }
}
