"""Train lesson 7's tiny encoder–decoder and measure how its cross-attention aligns the words.

Plain PyTorch, runnable on its own. German clauses with the verb at the end are written in
English order; every English word has one known German partner. Every random draw comes from
one generator, in the page's order (the held-out split, the weights, then one batch per step),
so the printed share and weights are the page's.
"""

import itertools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# --- settings (the page fills in its current values) ---
d_model = 32
steps = 300
batch_size = 64
learning_rate = 0.01
held_out_share = 0.2
seed = 123
german_text = "Kannst du mir helfen diesen Satz zu übersetzen"  # a held-out clause to look at
english_text = "Can you help me translate this sentence"
# --- end of settings ---

# The vocabulary: (German subject, English subject, German dative object, English object)
PERSONS = [
    ("ich", "I", "mir", "me"),
    ("du", "you", "dir", "you"),
    ("er", "he", "ihm", "him"),
    ("sie", "she", "ihr", "her"),
    ("wir", "we", "uns", "us"),
    ("ihr", "you", "euch", "you"),
]
SUBJECTS = range(5)  # "ihr" opens no clause: as a subject it would need a second English word
MODALS = [
    ("Can", ["Kann", "Kannst", "Kann", "Kann", "Können"]),
    ("Must", ["Muss", "Musst", "Muss", "Muss", "Müssen"]),
    ("Should", ["Soll", "Sollst", "Soll", "Soll", "Sollen"]),
]
NOUNS = [
    ("Satz", "sentence", "den", "diesen"),
    ("Brief", "letter", "den", "diesen"),
    ("Text", "text", "den", "diesen"),
    ("Buch", "book", "das", "dieses"),
    ("Wort", "word", "das", "dieses"),
    ("Gedicht", "poem", "das", "dieses"),
    ("Seite", "page", "die", "diese"),
    ("Frage", "question", "die", "diese"),
    ("Geschichte", "story", "die", "diese"),
]
INFINITIVES = [
    ("übersetzen", "translate"),
    ("lesen", "read"),
    ("schreiben", "write"),
    ("verstehen", "understand"),
    ("finden", "find"),
    ("prüfen", "check"),
    ("lernen", "learn"),
]
GIVING_VERBS = [
    ("give", ["gebe", "gibst", "gibt", "gibt", "geben"]),
    ("show", ["zeige", "zeigst", "zeigt", "zeigt", "zeigen"]),
    ("send", ["schicke", "schickst", "schickt", "schickt", "schicken"]),
    ("bring", ["bringe", "bringst", "bringt", "bringt", "bringen"]),
]
# English word i renders German word ORDERS[form][i]
FORMS = ["help_to", "help", "modal", "dass"]
ORDERS = {"help_to": [0, 1, 3, 2, 7, 4, 5], "help": [0, 1, 3, 2], "modal": [0, 1, 4, 2, 3], "dass": [0, 1, 5, 2, 3, 4]}


def thing(noun: tuple, this: bool) -> tuple[list[str], list[str]]:
    return [noun[3] if this else noun[2], noun[0]], ["this" if this else "the", noun[1]]


clauses = []  # (form, German words, English words), in the page's order
people = [(s, o) for s, o in itertools.product(SUBJECTS, range(6)) if s != o and PERSONS[s][1] != PERSONS[o][3]]
for (modal_en, modal_de), (s, o) in itertools.product(MODALS, people):
    opening_de, opening_en = [modal_de[s], PERSONS[s][0]], [modal_en, PERSONS[s][1]]
    clauses.append(("help", [*opening_de, PERSONS[o][2], "helfen"], [*opening_en, "help", PERSONS[o][3]]))
    for noun, this, (verb_de, verb_en) in itertools.product(NOUNS, (False, True), INFINITIVES):
        thing_de, thing_en = thing(noun, this)
        german = [*opening_de, PERSONS[o][2], "helfen", *thing_de, "zu", verb_de]
        clauses.append(("help_to", german, [*opening_en, "help", PERSONS[o][3], verb_en, *thing_en]))
for (modal_en, modal_de), s, noun, this, (verb_de, verb_en) in itertools.product(
    MODALS, SUBJECTS, NOUNS, (False, True), INFINITIVES
):
    thing_de, thing_en = thing(noun, this)
    clauses.append(
        ("modal", [modal_de[s], PERSONS[s][0], *thing_de, verb_de], [modal_en, PERSONS[s][1], verb_en, *thing_en])
    )
for (verb_en, forms), s, o, noun, this in itertools.product(GIVING_VERBS, SUBJECTS, range(6), NOUNS, (False, True)):
    if s == o or PERSONS[s][1] == PERSONS[o][3]:
        continue
    thing_de, thing_en = thing(noun, this)
    verb = verb_en + "s" if s in (2, 3) else verb_en  # he, she
    clauses.append(
        (
            "dass",
            ["dass", PERSONS[s][0], PERSONS[o][2], *thing_de, forms[s]],
            ["that", PERSONS[s][1], verb, PERSONS[o][3], *thing_en],
        )
    )

GERMAN = ["<pad>", *sorted({w for c in clauses for w in c[1]})]
ENGLISH = ["<pad>", "<start>", *sorted({w for c in clauses for w in c[2]})]
S, T, IGNORE = 8, 7, -100  # the longest clause on each side; cross_entropy's ignore_index


def as_tensors(chosen: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """German ids (B, S), decoder input (B, T): <start> then the English words but the last; targets (B, T)."""
    german, decoder_in, targets = [], [], []
    for _, de, en in chosen:
        words = [ENGLISH.index(w) for w in en]
        german.append([GERMAN.index(w) for w in de] + [0] * (S - len(de)))
        decoder_in.append([1, *words[:-1]] + [0] * (T - len(words)))
        targets.append(words + [IGNORE] * (T - len(words)))
    return torch.tensor(german), torch.tensor(decoder_in), torch.tensor(targets)


generator = torch.Generator().manual_seed(seed)
order = torch.randperm(len(clauses), generator=generator).tolist()
count = round(held_out_share * len(clauses))
held_out = [clauses[i] for i in order[:count]]
train = [clauses[i] for i in order[count:]]
OVERVIEW = (
    "help_to",
    ["Kannst", "du", "mir", "helfen", "diesen", "Satz", "zu", "übersetzen"],
    ["Can", "you", "help", "me", "translate", "this", "sentence"],
)
if OVERVIEW in train:  # the overview's clause is never trained on
    train.remove(OVERVIEW)
else:
    held_out.remove(OVERVIEW)
held_out = [OVERVIEW, *held_out]


def embedding(num: int) -> nn.Embedding:
    layer = nn.Embedding(num, d_model, device="meta").to_empty(device="cpu")
    nn.init.normal_(layer.weight, generator=generator)
    return layer


def linear(d_in: int, d_out: int) -> nn.Linear:
    """nn.Linear (no bias) with PyTorch's default initialisation, drawn from our generator."""
    layer = nn.Linear(d_in, d_out, bias=False, device="meta")
    layer.weight = nn.Parameter(torch.empty(d_out, d_in))
    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
    return layer


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, may: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_k)) v where `may` is True; (weights, context)."""
    scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1]))  # (B, T, S)
    weights = torch.softmax(scores.masked_fill(~may, float("-inf")), dim=-1).nan_to_num(0.0)
    return weights, weights @ v


class TinySeq2Seq(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.german_embedding, self.german_position = embedding(len(GERMAN)), embedding(S)
        self.english_embedding, self.english_position = embedding(len(ENGLISH)), embedding(T)
        self.self_query, self.self_key, self.self_value = (linear(d_model, d_model) for _ in range(3))
        self.W_query = nn.Linear(d_model, d_model, bias=False, device="meta")
        self.W_query.weight = nn.Parameter(torch.zeros(d_model, d_model))  # reads every German word equally at first
        self.W_key, self.W_value = linear(d_model, d_model), linear(d_model, d_model)
        self.unembedding = linear(d_model, len(ENGLISH))

    def forward(self, german: torch.Tensor, decoder_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (B, T, V), cross-attention weights (B, T, S))."""
        source = self.german_embedding(german) + self.german_position(torch.arange(german.shape[1]))  # (B, S, D)
        x = self.english_embedding(decoder_in) + self.english_position(torch.arange(decoder_in.shape[1]))
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()  # (T, T)
        x = x + attention(self.self_query(x), self.self_key(x), self.self_value(x), causal)[1]  # (B, T, D)
        values = self.W_value(self.german_embedding(german))  # the word alone: what is there
        weights, context = attention(self.W_query(x), self.W_key(source), values, (german != 0)[:, None, :])
        return self.unembedding(context), weights  # no residual: it writes what it read


model = TinySeq2Seq()
train_tensors, held_tensors = as_tensors(train), as_tensors(held_out)
by_form = [torch.tensor([i for i, c in enumerate(train) if c[0] == form]) for form in FORMS]
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
for _step in range(1, steps + 1):
    form_ids = torch.randint(0, len(FORMS), (batch_size,), generator=generator)  # each form equally often
    place = torch.rand(batch_size, generator=generator)
    inside = (place * torch.tensor([len(r) for r in by_form])[form_ids]).long()
    rows = torch.stack([by_form[f][i] for f, i in zip(form_ids.tolist(), inside.tolist(), strict=True)])
    logits, _ = model(train_tensors[0][rows], train_tensors[1][rows])
    loss = F.cross_entropy(logits.flatten(0, 1), train_tensors[2][rows].flatten(), ignore_index=IGNORE)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

with torch.no_grad():
    logits, weights = model(held_tensors[0], held_tensors[1])
    on_partner = torch.cat([weights[b, torch.arange(len(c[2])), ORDERS[c[0]]] for b, c in enumerate(held_out)])
    share = float(on_partner.mean())  # of each English word's weight, the share on its German partner
    scored = held_tensors[2] != IGNORE
    accuracy = float((logits.argmax(dim=-1)[scored] == held_tensors[2][scored]).float().mean())
    mine = [c for c in held_out if c[1] == german_text.split() and c[2] == english_text.split()]
    pair = as_tensors(mine)
    pair_weights = model(pair[0], pair[1])[1][0, : len(mine[0][2]), : len(mine[0][1])]  # (T, S)
print(f"held-out clauses: {len(held_out)}, alignment share {share:.4f}, next-word accuracy {accuracy:.4f}")
torch.set_printoptions(precision=4, sci_mode=False)
print(pair_weights)  # (English words, German words): each row sums to 1
