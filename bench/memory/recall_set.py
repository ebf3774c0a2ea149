"""Hand-written memories and paraphrased recall queries for `bench.memory.recall --meaning`.

Each pair is a memory an agent could have saved (user preferences, project facts, lore of a
fiction vault) and a question asked later in other words, as a new session would ask it.
Most paraphrases share no content word with their memory; `memory_bench` counts those.
The distractors are generated from templates over the same topics, so words alone are
tempted by the wrong memories.
"""

import random

# (memory content, tags, paraphrased query)
PAIRS: list[tuple[str, tuple[str, ...], str]] = [
    ("The user prefers dark mode in every editor.", ("user", "preference"),
     "which colour theme do they like for coding tools?"),
    ("The user wants answers in British English spelling.", ("user", "preference"),
     "how should words be spelt in replies, UK or US?"),
    ("The user drinks green tea, never coffee, during long writing sessions.", ("user",),
     "what beverage do they have while drafting chapters?"),
    ("The user is vegetarian; suggest recipes without meat or fish.", ("user", "food"),
     "dietary restriction to remember when proposing dishes"),
    ("The user's daughter Lena starts school in September.", ("user", "family"),
     "when does their child begin classes?"),
    ("The user works from Lisbon and is on Western European Time.", ("user",),
     "which time zone are they in?"),
    ("Weekly review happens every Friday afternoon in the Journal folder.", ("user", "habit"),
     "when do they look back over the past seven days?"),
    ("The user dislikes emoji in commit messages.", ("user", "git"),
     "should pictograms go into version-control notes?"),
    ("The deploy script needs Python 3.11 on the build server.", ("project", "deploy"),
     "interpreter version required for releasing"),
    ("Staging database credentials rotate on the first day of each month.", ("project", "ops"),
     "how often do the test environment passwords change?"),
    ("The API rate limit is 100 requests per minute per token.", ("project", "api"),
     "how many calls can one key make before being throttled?"),
    ("We chose SQLite over Postgres for the offline cache to avoid a server.", ("project",),
     "why did the team pick an embedded database for local storage?"),
    ("Continuous integration fails if test coverage drops below 85 percent.", ("project", "ci"),
     "what threshold of exercised code does the pipeline enforce?"),
    ("The mobile app's release is frozen until the payment bug is fixed.", ("project", "release"),
     "what is blocking shipping the phone client?"),
    ("Logs are kept for 30 days and then deleted automatically.", ("project", "ops"),
     "retention period of diagnostic output"),
    ("The design system uses Inter as its only typeface.", ("project", "design"),
     "which font does the UI kit rely on?"),
    ("Backups of the vault run nightly to an external drive.", ("vault", "backup"),
     "how are the notes protected against loss?"),
    ("Meeting notes always go in the folder Work/Meetings with the date first.", ("vault",),
     "where should minutes of a call be filed?"),
    ("Gale is afraid of deep water since the shipwreck.", ("gale", "lore"),
     "what frightens her about the sea?"),
    ("Mira owes the Silver Guild three hundred crowns.", ("mira", "lore"),
     "how much money is she in debt to the merchants' union?"),
    ("The city of Vael was founded by exiles from the northern isles.", ("vael", "lore"),
     "who established that town originally?"),
    ("Captain Oren lost his left eye in a duel with a smuggler.", ("oren", "lore"),
     "how was the ship master wounded in the face?"),
    ("The Ember Crown can only be worn by someone of royal blood.", ("artifact", "lore"),
     "who is allowed to put on the fiery diadem?"),
    ("Dragons in this world hibernate through the whole winter.", ("dragon", "lore"),
     "what do the great winged beasts do during the cold season?"),
    ("The healer Anwen refuses payment from children.", ("anwen", "lore"),
     "which physician treats kids for free?"),
    ("Tomas betrayed the rebels to the queen's spies.", ("tomas", "plot"),
     "who informed on the insurgents?"),
    ("The lighthouse keeper on Gull Rock is secretly a retired assassin.", ("lore", "secret"),
     "hidden past of the man tending the coastal beacon"),
    ("Magic in the setting costs the caster a memory each time.", ("magic", "lore"),
     "what price do sorcerers pay for casting spells?"),
    ("The river Seln floods every spring and cuts the east road.", ("geography", "lore"),
     "seasonal water rise that blocks travel"),
    ("Brother Ilan keeps a forbidden library under the monastery.", ("ilan", "lore"),
     "where are the banned books hidden?"),
    ("The twins Kai and Suri were separated at birth.", ("twins", "plot"),
     "siblings who grew up apart since infancy"),
    ("The harbour tax doubled after the war with Dorn.", ("economy", "lore"),
     "why did port duties rise so much?"),
    ("The user asked to be reminded to stretch every hour.", ("user", "health"),
     "what break should the assistant prompt them to take regularly?"),
    ("The novel's working title is The Salt Orchard.", ("book",),
     "what is the manuscript provisionally called?"),
]

_SUBJECTS = ["Gale", "Mira", "Oren", "Anwen", "Tomas", "Ilan", "Suri", "Kai", "the user",
             "the team", "the council", "the guild", "the captain", "the queen", "Lena",
             "the editor", "the build", "the client", "the server", "the archive"]
_VERBS = ["mentioned", "decided", "noted", "asked about", "forgot", "changed", "reviewed",
          "postponed", "planned", "rejected", "approved", "moved", "questioned", "recorded"]
_OBJECTS = ["the harbour map", "the release checklist", "the spring festival", "the tea order",
            "the database schema", "the old lighthouse", "the guild ledger", "the river road",
            "the chapter outline", "the login page", "the budget sheet", "the winter supplies",
            "the school forms", "the dragon census", "the backup drive", "the font choice",
            "the sea chart", "the rate card", "the monastery roof", "the crown jewels",
            "the meeting agenda", "the coverage report", "the trade treaty", "the recipe list"]
_DETAILS = ["on Monday", "after the storm", "for the next sprint", "before the council met",
            "in the north wing", "with some doubts", "at the last minute", "for the third time",
            "without telling anyone", "as a favour", "during the night", "for the archive"]


def distractors(count: int, seed: int = 11) -> list[tuple[str, tuple[str, ...]]]:
    """`count` distinct memories built from templates, with tags from their subject."""
    rng = random.Random(seed)
    made: dict[str, tuple[str, ...]] = {}
    while len(made) < count:
        subject = rng.choice(_SUBJECTS)
        sentence = (f"{subject} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
                    f"{rng.choice(_DETAILS)}.")
        tag = subject.removeprefix("the ").lower()
        made[sentence[0].upper() + sentence[1:]] = (tag.replace(" ", "-"),)
    return list(made.items())
