"""Hand-written memories and queries for `bench.memory.quality`: a companion's view of one
user's life and of the roleplay campaign they play together.

The user is Sam; the companion keeps what Sam tells it about family, pets, work, health,
tastes, plans and places, and what happened in "The Drowned Crown", the campaign in which
Sam plays the thief Tamsin. The sentences are short, as an agent writes them.

- `MEMORIES`: what is stored before anything is asked, by key. The few with a `scope` are
  one character's private knowledge (tamsin, bram, wren, odile).
- `PARAPHRASES`: a question asked later, by the key of the memory that answers it. The
  questions name people by role ("my sister", "the innkeeper") and use other words, as a
  user or agent would weeks later.
- `CHANGES`: a fact that changed: the old memory, the newer one that replaces it, and a
  question whose right answer is the newer.
- `NEAR_DUPLICATES`: a stored memory and a reworded restatement of the same fact;
  `RELATED`: a stored memory and a different fact about the same people or topic.
- `UNANSWERABLE`: questions about the same world that no memory answers, with the stored
  memory each comes closest to in topic.
- `OFF_TOPIC`: questions about nothing in this world at all (no shared name or topic).
- `SCOPE_QUERIES`: a character's question whose words or meaning lead to another
  character's private memory.

Every list is split into a development part and a held-out third by `split`, a seeded
shuffle fixed before any result was seen (its test pins it): a threshold is chosen on the
development part only and then reported on the held-out third.
"""

import random
from collections.abc import Iterable
from typing import NamedTuple

# The split's seed; `tests/test_memory_quality_set.py` pins the split it gives.
SPLIT_SEED = "drowned-crown-2026"


class Fact(NamedTuple):
    content: str
    tags: tuple[str, ...]
    type: str | None = None
    scope: str | None = None


class Change(NamedTuple):
    old: Fact
    new: Fact
    query: str


class Pair(NamedTuple):
    existing: str  # the key of the stored memory
    content: str  # what is remembered next, with the same tags


class Unanswerable(NamedTuple):
    query: str
    near: str  # the key of the stored memory closest in topic


class ScopeQuery(NamedTuple):
    scope: str  # who asks
    query: str
    tempts: str  # the key of another character's memory the question leads to


MEMORIES: dict[str, Fact] = {
    # -- family -----------------------------------------------------------------------------
    "sister-hannah": Fact("Sam's older sister Hannah is a paediatric nurse in Bristol.",
                          ("family", "hannah"), "fact"),
    "hannah-twins": Fact("Hannah has six-year-old twins, Ollie and Fern.",
                         ("family", "hannah"), "fact"),
    "hannah-party": Fact("Hannah turns forty on 9 June and Sam is organising a surprise party.",
                         ("family", "hannah", "plans"), "plan"),
    "luca-band": Fact("Luca plays drums in a post-punk band called Static Hymn.",
                      ("family", "luca"), "fact"),
    "luca-flat": Fact("Luca shares a damp flat in Partick with two other students.",
                      ("family", "luca"), "fact"),
    "mum-carol": Fact("Sam's mum Carol is a retired primary school teacher living in Whitby.",
                      ("family", "carol"), "fact"),
    "mum-greenhouse": Fact("Carol spends most mornings in her greenhouse with tomatoes and "
                           "sweet peas.", ("family", "carol"), "fact"),
    "carol-voice-notes": Fact("Carol has just learnt WhatsApp and sends Sam long voice "
                              "notes.", ("family", "carol"), "fact"),
    "middle-name": Fact("Sam's middle name is Alexis, after a great-aunt.", ("family",),
                        "fact"),
    "mum-birthday": Fact("Carol's birthday is 22 November; she likes lavender soap and crime "
                         "novels as presents.", ("family", "carol", "dates"), "fact"),
    "dad-death": Fact("Sam's dad Peter died of a heart attack in March 2019; March is still "
                      "hard for Sam.", ("family", "grief"), "fact"),
    "dad-boat": Fact("Peter used to take Sam fishing off Whitby pier in a little blue "
                     "rowing boat.", ("family", "childhood"), "fact"),
    "partner-priya": Fact("Sam lives with their partner Priya, who grew up in Leicester.",
                          ("partner", "priya"), "fact"),
    "anniversary": Fact("Sam and Priya's anniversary is 14 March; they met at a pub quiz "
                        "in 2018.", ("partner", "dates"), "fact"),
    "priya-food": Fact("Priya is vegetarian and can't stand mushrooms.",
                       ("partner", "food"), "preference"),
    "priya-bouldering": Fact("Priya bouldered competitively at university and still trains "
                             "twice a week.", ("partner", "priya"), "fact"),
    "priya-snores": Fact("Priya snores, so Sam sleeps with foam earplugs.",
                         ("partner", "sleep"), "fact"),
    "priya-car": Fact("Priya drives a battered red Fiat Panda she calls Rosie.",
                      ("partner", "priya"), "fact"),
    "priya-sister": Fact("Priya's younger sister Kavya starts medical school in Edinburgh "
                         "this autumn.", ("partner", "family"), "fact"),
    "in-laws": Fact("Priya's parents, Anil and Meena, run a pharmacy in Leicester.",
                    ("partner", "family"), "fact"),
    "nana-rose": Fact("Sam's grandmother Rose is 91 and never misses the Friday bingo.",
                      ("family", "rose"), "fact"),
    "nana-visits": Fact("Sam visits Nana Rose on the first Sunday of every month.",
                        ("family", "rose", "routine"), "fact"),
    "cousin-marcus": Fact("Cousin Marcus owes Sam £400 from a festival trip and keeps "
                          "avoiding the subject.", ("family", "money"), "fact"),
    "uncle-derek": Fact("Uncle Derek votes very differently from Sam, so Sam steers clear "
                        "of politics at family dinners.", ("family",), "fact"),
    "christmas": Fact("This Christmas is at Carol's in Whitby; last year it was at Priya's "
                      "parents'.", ("family", "plans"), "plan"),
    # -- friends ----------------------------------------------------------------------------
    "friend-jonah": Fact("Sam's best friend Jonah plays bass and works in a record shop in "
                         "Leeds.", ("friends", "jonah"), "fact"),
    "jonah-wedding": Fact("Jonah is marrying his boyfriend Theo in Lisbon next September, "
                          "and Sam is best man.", ("friends", "jonah", "plans"), "plan"),
    "friend-aisha": Fact("Aisha, Sam's friend from university, just had a baby girl called "
                         "Nell.", ("friends", "aisha"), "fact"),
    "coworker-ravi": Fact("Ravi, a developer at Fernleaf, is Sam's lunch buddy and a fellow "
                          "board-game fan.", ("work", "friends"), "fact"),
    "pub-quiz": Fact("Sam's Monday quiz team at the Arc is called Quizteama Aguilera.",
                     ("friends", "routine"), "fact"),
    "board-games": Fact("Sam hosts a board-game night on the last Saturday of each month; "
                        "Wingspan is the favourite.", ("hobbies", "friends"), "fact"),
    # -- pets -------------------------------------------------------------------------------
    "dog-biscuit": Fact("Biscuit is Sam's rescue greyhound, adopted in 2021.",
                        ("pets", "biscuit"), "fact"),
    "biscuit-fireworks": Fact("Biscuit is terrified of fireworks and hides in the bath on "
                              "Bonfire Night.", ("pets", "biscuit"), "fact"),
    "biscuit-walk": Fact("Biscuit gets a lap of Meanwood Park before Sam starts work.",
                         ("pets", "biscuit", "routine"), "fact"),
    "biscuit-gotcha": Fact("Biscuit's adoption day is 12 October and he gets a sausage to "
                           "celebrate.", ("pets", "dates"), "fact"),
    "biscuit-insurance": Fact("Biscuit's pet insurance with PetWise renews every January.",
                              ("pets", "money"), "fact"),
    "cat-pickle": Fact("Pickle the cat is fourteen and on a prescription kidney diet.",
                       ("pets", "pickle", "health"), "fact"),
    "pickle-vet": Fact("Pickle's vet is Dr Okafor at Hyde Park Vets, with check-ups every "
                       "three months.", ("pets", "pickle"), "fact"),
    "neighbour": Fact("Mrs Adeyemi from downstairs feeds Pickle when Sam and Priya travel.",
                      ("home", "pickle"), "fact"),
    "childhood-rabbit": Fact("As a kid Sam had a rabbit called Thumper who lived to eleven.",
                             ("childhood", "pets"), "fact"),
    "volunteer": Fact("Sam wants to volunteer at the greyhound rescue Biscuit came from.",
                      ("plans", "biscuit"), "plan"),
    # -- work -------------------------------------------------------------------------------
    "job": Fact("Sam is a UX designer at Fernleaf Studio, a twelve-person agency.",
                ("work",), "fact"),
    "wfh": Fact("Sam works from home on Mondays and Fridays and is in the office the other "
                "days.", ("work", "routine"), "fact"),
    "commute": Fact("Sam cycles to the office unless it is raining.", ("work", "routine"),
                    "fact"),
    "northgate": Fact("Sam is redesigning the mobile app of Northgate, a building society "
                      "client.", ("work", "northgate"), "fact"),
    "northgate-deadline": Fact("The Northgate redesign is due at the end of April.",
                               ("work", "northgate"), "fact"),
    "promotion": Fact("Sam wants the lead designer role this year and is preparing a "
                      "portfolio for it.", ("work", "goals"), "plan"),
    "salary": Fact("Sam earns about £42,000 and feels underpaid for the market.",
                   ("work", "money"), "fact"),
    "impostor": Fact("Sam often feels like an impostor when presenting to clients.",
                     ("work", "feelings"), "fact"),
    "side-project": Fact("Sam is building a plant-watering reminder app on the side.",
                         ("projects",), "fact"),
    "meetup-talk": Fact("Sam is giving a talk on accessible forms at a Manchester design "
                        "meetup on 18 May.", ("work", "events"), "plan"),
    "old-job": Fact("Before Fernleaf, Sam spent five years in a call centre in Bradford.",
                    ("work", "history"), "fact"),
    "figma-shortcuts": Fact("Sam wants the companion to quiz them on Figma shortcuts on "
                            "slow days.", ("work", "companion"), "preference"),
    # -- health -----------------------------------------------------------------------------
    "asthma": Fact("Sam has mild asthma and carries a blue inhaler when running.",
                   ("health",), "fact"),
    "penicillin": Fact("Sam is allergic to penicillin; it gave them hives as a teenager.",
                       ("health", "allergy"), "fact"),
    "lactose": Fact("Sam is lactose intolerant and takes oat milk.", ("health", "food"),
                    "fact"),
    "knee": Fact("Sam is doing physio for a left knee injury from running.",
                 ("health", "running"), "fact"),
    "sleep": Fact("Sam struggles to fall asleep and is trying no screens after 10pm.",
                  ("health", "sleep"), "fact"),
    "migraine": Fact("Bright screens and skipped lunches can trigger Sam's migraines.",
                     ("health",), "fact"),
    "glasses": Fact("Sam got new glasses in January: short-sighted, -2.5 in both eyes.",
                    ("health",), "fact"),
    "dentist": Fact("Sam has a dentist appointment on 3 April for a filling.",
                    ("health", "appointments"), "event"),
    "gp": Fact("Sam's GP is Dr Halloran at the Woodhouse surgery.", ("health",), "fact"),
    "caffeine": Fact("Sam is cutting down to two coffees a day, none after 2pm.",
                     ("health", "habits"), "fact"),
    "winter-low": Fact("Sam gets low in winter and uses a daylight lamp in the mornings.",
                       ("health", "mental-health"), "fact"),
    "broken-wrist": Fact("Sam broke their wrist falling off a bike at age nine.",
                         ("health", "childhood"), "fact"),
    "heights": Fact("Sam is scared of heights, though indoor climbing walls are fine.",
                    ("feelings",), "fact"),
    "vitamin-d": Fact("Sam takes a vitamin D tablet every morning from October to March.",
                      ("health", "habits"), "fact"),
    # -- tastes -----------------------------------------------------------------------------
    "coriander": Fact("Sam hates coriander; it tastes like soap to them.",
                      ("preferences", "food"), "preference"),
    "horror": Fact("Sam loves slow-burn horror films, especially The Witch and Hereditary.",
                   ("preferences", "films"), "preference"),
    "le-guin": Fact("Sam's favourite author is Ursula K. Le Guin; The Dispossessed is a "
                    "comfort read.", ("preferences", "books"), "preference"),
    "folk": Fact("Sam listens mostly to folk music, lately a lot of Lankum.",
                 ("preferences", "music"), "preference"),
    "colour": Fact("Sam's favourite colour is moss green.", ("preferences",), "preference"),
    "guitar": Fact("Sam is teaching themself guitar and knows about six chords.",
                   ("hobbies", "music"), "fact"),
    "football": Fact("Sam supports Leeds United and watches the matches in the pub with "
                     "Jonah.", ("preferences", "football"), "preference"),
    "reply-style": Fact("Sam prefers short replies without bullet points in casual chat.",
                        ("preferences", "companion"), "preference"),
    "nickname": Fact("Only family may call Sam 'Sammy'.", ("preferences", "companion"),
                     "preference"),
    "spicy": Fact("Sam loves very spicy food, the hotter the better.",
                  ("preferences", "food"), "preference"),
    "peppermint": Fact("In the evening Sam drinks peppermint tea instead of coffee.",
                       ("preferences", "food"), "preference"),
    "cheer-up": Fact("When Sam is sad they want distraction and jokes, not advice.",
                     ("preferences", "companion", "feelings"), "preference"),
    "crossword": Fact("Sam does the Guardian cryptic crossword on Saturdays.",
                      ("hobbies", "routine"), "fact"),
    "sourdough": Fact("Sam bakes sourdough and named the starter Gerald.",
                      ("hobbies", "food"), "fact"),
    "podcasts": Fact("Sam listens to history podcasts while cycling.", ("preferences",),
                     "preference"),
    "phone-calls": Fact("Sam hates phone calls and would rather get a text.",
                        ("preferences",), "preference"),
    "companion-name": Fact("Sam named the companion Juniper and likes it to remember small "
                           "details.", ("companion",), "preference"),
    "swearing": Fact("Sam is fine with swearing in chat but not in the story's narration.",
                     ("companion", "preferences"), "preference"),
    "ramen": Fact("Sam's comfort food is tonkotsu-style ramen from Little Tokyo on "
                  "Vicar Lane.", ("food", "places"), "preference"),
    "houseplants": Fact("Sam keeps about thirty houseplants, and the monstera is called "
                        "Doris.", ("hobbies", "home"), "fact"),
    "bike": Fact("Sam rides a second-hand green Dawes tourer called Basil.",
                 ("hobbies", "cycling"), "fact"),
    "seasick": Fact("Sam gets seasick on ferries, even short crossings.", ("health", "travel"),
                    "fact"),
    "less-meat": Fact("Sam is eating less meat: three vegetarian days a week.",
                      ("food", "goals"), "fact"),
    "watership": Fact("Sam's favourite book as a child was Watership Down.",
                      ("books", "childhood"), "preference"),
    "nail-biting": Fact("Sam bites their nails when stressed and wants a gentle nudge about "
                        "it.", ("habits", "companion"), "preference"),
    # -- plans and goals --------------------------------------------------------------------
    "japan-kyoto": Fact("On the Japan trip Sam most wants to see the moss gardens of Kyoto.",
                        ("plans", "travel"), "plan"),
    "half-marathon": Fact("Sam is training for the Leeds half-marathon in May.",
                          ("plans", "running"), "plan"),
    "portuguese": Fact("Sam is learning Portuguese on Duolingo before Jonah's wedding.",
                       ("plans", "learning"), "plan"),
    "buy-house": Fact("Sam and Priya want to buy a house with a garden within two years.",
                      ("plans", "home", "money"), "plan"),
    "saving-rate": Fact("They put £600 a month towards the house deposit.",
                        ("money", "plans"), "fact"),
    "bathroom": Fact("The bathroom renovation starts in June; the tiler is called Gav.",
                     ("home", "plans"), "plan"),
    "driving": Fact("Sam is taking driving lessons with an instructor called Beverley.",
                    ("plans", "driving"), "fact"),
    "reading-goal": Fact("Sam set a goal of reading 30 books this year.",
                         ("goals", "books"), "plan"),
    "tattoo": Fact("Sam is thinking about a fern tattoo on the forearm.", ("plans",), "plan"),
    "allotment-crops": Fact("Sam plans to grow potatoes, beans and courgettes on the "
                            "allotment this spring.", ("garden", "plans"), "plan"),
    "lankum-gig": Fact("Sam has tickets to see Lankum at the Brudenell on 21 March.",
                       ("plans", "music"), "event"),
    "laptop": Fact("Sam is saving for a new laptop because the old one overheats.",
                   ("money", "plans"), "plan"),
    "phone-contract": Fact("Sam's phone contract ends in September.", ("money", "dates"),
                           "fact"),
    "payday": Fact("Sam gets paid on the 28th of each month.", ("money", "dates"), "fact"),
    "money-worry": Fact("Sam gets anxious about money in the last week before payday.",
                        ("money", "feelings"), "fact"),
    "camping": Fact("Sam and Priya plan a camping weekend in the Lake District in July.",
                    ("plans", "travel"), "plan"),
    # -- places and history -----------------------------------------------------------------
    "hometown": Fact("Sam grew up in Whitby and still misses the sea.",
                     ("childhood", "places"), "fact"),
    "cafe": Fact("Sam's favourite café is The Owl on Otley Road, for its window seat.",
                 ("places", "food"), "preference"),
    "allotment": Fact("Sam rents plot 12 at the Woodhouse Ridge allotments.",
                      ("home", "garden"), "fact"),
    "university": Fact("Sam studied graphic design at Northumbria University in Newcastle.",
                       ("history", "education"), "fact"),
    "cliff-walk": Fact("Sam's favourite walk is the cliff path from Whitby to Robin Hood's "
                       "Bay.", ("places", "walking"), "preference"),
    "birthday": Fact("Sam's birthday is 3 August.", ("dates",), "fact"),
    "leeds-10k": Fact("Sam ran the Leeds 10k last year in 58 minutes.",
                      ("running", "history"), "fact"),
    "first-flat": Fact("Sam's first flat was above a chip shop in Newcastle.",
                       ("history", "home"), "fact"),
    "lyon-year": Fact("Sam speaks some French from a year in Lyon as a student.",
                      ("history", "languages"), "fact"),
    "library": Fact("Sam borrows most books from the Headingley library rather than buying.",
                    ("books", "places"), "fact"),
    # -- the campaign: how Sam likes it -----------------------------------------------------
    "campaign": Fact("The campaign is called The Drowned Crown, and Sam plays Tamsin.",
                     ("campaign", "meta"), "fact"),
    "combat-style": Fact("Sam likes combat told briefly and dialogue in detail.",
                         ("campaign", "preferences"), "preference"),
    "spiders": Fact("Sam asked to keep spiders out of the story.",
                    ("campaign", "preferences"), "preference"),
    "session-night": Fact("Sessions usually happen on Sunday evenings.",
                          ("campaign", "routine"), "fact"),
    "romance": Fact("Sam wants a slow-burn romance between Tamsin and Kessick.",
                    ("campaign", "plans"), "plan"),
    "next-session": Fact("The next session should open with the party waking in the "
                         "Abbess's cellar.", ("campaign", "plans"), "plan"),
    # -- the campaign: people ---------------------------------------------------------------
    "tamsin": Fact("Tamsin is a half-elf thief raised on the docks of Osk.",
                   ("campaign", "tamsin"), "lore"),
    "tamsin-dagger": Fact("Tamsin's dagger is called Whisper; it was her mother's.",
                          ("campaign", "tamsin", "items"), "lore"),
    "tamsin-swim": Fact("Tamsin cannot swim and hides it from the others.",
                        ("campaign", "tamsin"), "lore"),
    "bram": Fact("Bram is a soldier turned blacksmith with a booming laugh.",
                 ("campaign", "bram"), "lore"),
    "bram-hammer": Fact("Bram's warhammer is named Old Ember and glows faintly near magic.",
                        ("campaign", "bram", "items"), "lore"),
    "bram-daughter": Fact("Bram's daughter Elsie lives with her aunt in Vastry.",
                          ("campaign", "bram"), "lore"),
    "wren": Fact("Wren is a druid of the Thornwood who can talk to birds.",
                 ("campaign", "wren"), "lore"),
    "wren-staff": Fact("Wren eats no meat and carries a staff of rowan.",
                       ("campaign", "wren"), "lore"),
    "odile": Fact("Odile runs the Gilded Eel inn in Osk and hears every harbour rumour.",
                  ("campaign", "odile"), "lore"),
    "odile-ale": Fact("Odile waters down the ale of anyone from the harbour watch.",
                      ("campaign", "odile"), "lore"),
    "mira": Fact("Mira Vance is a cartographer with ink-stained fingers and a short temper.",
                 ("campaign", "mira"), "lore"),
    "voss-debt": Fact("Captain Voss is secretly in debt to the smuggler Kessick.",
                      ("campaign", "voss"), "lore"),
    "harrow": Fact("Lord Aldric Harrow wants the Saltmarsh Crown to raise the drowned dead.",
                   ("campaign", "harrow"), "lore"),
    "abbess": Fact("The Abbess Sefa is blind and keeps the Drowned Chapel's records.",
                   ("campaign", "abbess"), "lore"),
    "pip": Fact("Pip is a ten-year-old orphan who runs messages for coppers.",
                ("campaign", "pip"), "lore"),
    "grella": Fact("Grella the marsh hag keeps stolen memories in glass jars.",
                   ("campaign", "grella"), "lore"),
    "kessick": Fact("Kessick is a smuggler with a gold tooth and a parrot named Admiral.",
                    ("campaign", "kessick"), "lore"),
    "admiral-password": Fact("Admiral the parrot keeps repeating the password 'low water'.",
                             ("campaign", "kessick"), "lore"),
    "quill": Fact("Ser Quill, Harrow's champion, fights left-handed.",
                  ("campaign", "harrow"), "lore"),
    "dunn": Fact("Sergeant Dunn served with Bram in the Border War and owes him his life.",
                 ("campaign", "bram", "dunn"), "lore"),
    "hesk": Fact("Hesk runs barges on the Greywater and sells information to anyone.",
                 ("campaign", "hesk"), "lore"),
    "soot": Fact("Soot was a one-eyed crow who had been with Wren since childhood.",
                 ("campaign", "wren"), "lore"),
    "maelis-pin": Fact("The archer Maelis wears a silver kestrel pin on her collar.",
                       ("campaign", "harrow"), "lore"),
    # -- the campaign: the world ------------------------------------------------------------
    "osk": Fact("Osk is a fishing port where fog rolls in every evening.",
                ("campaign", "places"), "lore"),
    "vastry": Fact("Vastry is the capital, a walled city on the Greywater river.",
                   ("campaign", "places"), "lore"),
    "thornwood": Fact("In the ancient Thornwood, iron tools rust overnight.",
                      ("campaign", "places"), "lore"),
    "saltmarsh": Fact("The Saltmarsh floods twice a day and hides sunken ruins.",
                      ("campaign", "places"), "lore"),
    "chapel-tide": Fact("The Drowned Chapel can only be entered at low tide.",
                        ("campaign", "places"), "lore"),
    "kestrel-keep": Fact("Kestrel Keep sits on a cliff above the sea, north of Osk.",
                         ("campaign", "places"), "lore"),
    "compass-lore": Fact("The Moonstone Compass points toward whatever its holder wants most.",
                         ("campaign", "items"), "lore"),
    "crown-power": Fact("Whoever wears the Saltmarsh Crown commands the drowned dead.",
                        ("campaign", "items", "crown"), "lore"),
    "currency": Fact("Money in the setting: gold crowns, silver stags and copper bits.",
                     ("campaign", "lore"), "lore"),
    "lantern-market": Fact("Vastry's Lantern Market opens only after sunset.",
                           ("campaign", "places"), "lore"),
    "pale-lady": Fact("The moon is called the Pale Lady, and an eclipse is a bad omen.",
                      ("campaign", "lore"), "lore"),
    "magic-licence": Fact("In Vastry, casting spells without a licence is a hanging offence.",
                          ("campaign", "lore"), "lore"),
    "eel-pie": Fact("The Gilded Eel is known for its eel pie and black ale.",
                    ("campaign", "odile"), "lore"),
    "sashes": Fact("The harbour watch wears blue sashes; Harrow's riders wear grey with a "
                   "kestrel badge.", ("campaign", "lore"), "lore"),
    "border-war": Fact("The Border War ended twelve years ago in a truce nobody trusts.",
                       ("campaign", "lore"), "lore"),
    "greywater-ice": Fact("The Greywater freezes in deep winter and the barges stop.",
                          ("campaign", "places"), "lore"),
    "sisters-tide": Fact("The Abbess's order, the Sisters of the Tide, bury the drowned at "
                         "sea.", ("campaign", "abbess"), "lore"),
    "elves-distrusted": Fact("Elves are rare in the setting and distrusted in Vastry.",
                             ("campaign", "lore"), "lore"),
    "mint-hounds": Fact("Clockwork hounds guard the Vastry mint at night.",
                        ("campaign", "places"), "lore"),
    # -- the campaign: what happened --------------------------------------------------------
    "s1-brawl": Fact("Session 1: the party met at the Gilded Eel when a brawl broke out "
                     "over a stolen map.", ("campaign", "session-1"), "event"),
    "s1-key": Fact("Session 1: Tamsin picked the lock of a sea chest and found a silver key "
                   "engraved with a heron.", ("campaign", "session-1", "items"), "event"),
    "s2-map-copy": Fact("Session 2: Mira agreed to copy the smuggler's map for twenty gold.",
                        ("campaign", "session-2", "mira"), "event"),
    "s2-sewers": Fact("Session 2: the party tailed Kessick's crew through the sewers under "
                      "Osk.", ("campaign", "session-2"), "event"),
    "s2-masked": Fact("Session 2: a masked woman paid Odile to keep a room free for 'the "
                      "heron's heir'.", ("campaign", "session-2", "odile"), "event"),
    "s3-blade": Fact("Session 3: Bram forged a new sword for Captain Voss in exchange for "
                     "a city pass.", ("campaign", "session-3", "bram"), "event"),
    "s3-crows": Fact("Session 3: Wren asked the bell-tower crows and learned a ship would "
                     "sail at dawn.", ("campaign", "session-3", "wren"), "event"),
    "s3-dice": Fact("Session 3: Tamsin beat Kessick's first mate at dice and won his boots.",
                    ("campaign", "session-3", "tamsin"), "event"),
    "s3-boat": Fact("Session 3: the party bought a rowing boat called Lucky Lass from a "
                    "fisherman.", ("campaign", "session-3"), "event"),
    "s4-wreck": Fact("Session 4: the Grey Heron sank in a storm off the Saltmarsh; Kessick "
                     "survived.", ("campaign", "session-4"), "event"),
    "s4-rescue": Fact("Session 4: Tamsin nearly drowned and Bram pulled her out.",
                      ("campaign", "session-4", "tamsin"), "event"),
    "s5-grella-trade": Fact("Session 5: Grella traded a vial of marsh-light for one of "
                            "Wren's memories.", ("campaign", "session-5", "grella"), "event"),
    "s5-chapel-found": Fact("Session 5: the party found the entrance to the Drowned Chapel.",
                            ("campaign", "session-5"), "event"),
    "s5-warning": Fact("Session 5: Grella warned that the crown remembers every hand that "
                       "held it.", ("campaign", "session-5", "crown"), "event"),
    "s6-three-pieces": Fact("Session 6: the Abbess revealed that the Saltmarsh Crown was "
                            "broken into three pieces.", ("campaign", "session-6", "crown"),
                            "event"),
    "s6-pearl-band": Fact("Session 6: the first crown piece, a band of black pearls, lay "
                          "under the chapel altar.", ("campaign", "session-6", "crown"),
                          "event"),
    "s6-dead-attack": Fact("Session 6: drowned dead rose and attacked when the altar was "
                           "opened.", ("campaign", "session-6"), "event"),
    "s6-shield": Fact("Session 6: Old Ember shattered a drowned knight's shield.",
                      ("campaign", "session-6", "bram"), "event"),
    "s7-fire": Fact("Session 7: Harrow's riders burned the eastern edge of the Thornwood "
                    "hunting for Wren.", ("campaign", "session-7", "harrow"), "event"),
    "s7-pip-scar": Fact("Session 7: Pip ran a warning to the Gilded Eel and got a scar on "
                        "his cheek.", ("campaign", "session-7", "pip"), "event"),
    "s7-charcoal": Fact("Session 7: the party sheltered with charcoal burners who hate "
                        "Harrow.", ("campaign", "session-7"), "event"),
    "s7-acorn": Fact("Session 7: Wren planted an acorn in the ashes and swore revenge.",
                     ("campaign", "session-7", "wren"), "event"),
    "s8-barge": Fact("Session 8: the party took a barge up the Greywater to Vastry.",
                     ("campaign", "session-8"), "event"),
    "s8-forged-note": Fact("Session 8: the barge captain overcharged them and was paid "
                           "with a forged note.", ("campaign", "session-8"), "event"),
    "s8-gates": Fact("Session 8: at the gates of Vastry an old comrade, Sergeant Dunn, "
                     "recognised Bram.", ("campaign", "session-8", "bram"), "event"),
    "s8-ledger-theft": Fact("Session 8: in the Lantern Market Tamsin stole a ledger from a "
                            "tax collector.", ("campaign", "session-8", "tamsin"), "event"),
    "s9-spies": Fact("Session 9: the ledger lists Harrow's spies in Osk, among them a "
                     "harbour watchman.", ("campaign", "session-9", "harrow"), "event"),
    "s9-mira-rescue": Fact("Session 9: the party freed Mira from Harrow's men in a Vastry "
                           "warehouse.", ("campaign", "session-9", "mira"), "event"),
    "s9-key-vault": Fact("Session 9: the silver key turned out to open a vault under the "
                         "Vastry mint.", ("campaign", "session-9", "items"), "event"),
    "s9-pip-cloak": Fact("Session 9: Pip became the party's errand runner and was given a "
                         "wool cloak.", ("campaign", "session-9", "pip"), "event"),
    "s10-duel": Fact("Session 10: Bram beat Ser Quill in a duel but broke two ribs.",
                     ("campaign", "session-10", "bram"), "event"),
    "s10-auction": Fact("Session 10: the second crown piece, a silver circlet fragment, was "
                        "bought at auction for 300 gold.", ("campaign", "session-10", "crown"),
                        "event"),
    "s10-bluff": Fact("Session 10: a veiled bidder outbid the party until Mira bluffed her "
                      "out.", ("campaign", "session-10", "mira"), "event"),
    "s10-tunnel-map": Fact("Session 10: Mira drew a map of the tunnels under the mint.",
                           ("campaign", "session-10", "mira"), "event"),
    "s11-soot": Fact("Session 11: an archer at Kestrel Keep killed Soot, Wren's crow.",
                     ("campaign", "session-11", "wren"), "event"),
    "s11-sea-wall": Fact("Session 11: the party climbed Kestrel Keep's sea wall at night.",
                         ("campaign", "session-11"), "event"),
    "s11-letter": Fact("Session 11: Tamsin copied a letter in Harrow's study saying the third "
                       "crown piece is with the Abbess.", ("campaign", "session-11", "crown"),
                       "event"),
    "s11-prisoners": Fact("Session 11: the party freed three prisoners from the keep's "
                          "dungeon.", ("campaign", "session-11"), "event"),
    "s12-outlaws": Fact("Session 12: the party was declared outlaws in Vastry and hid in the "
                        "Abbess's cellar.", ("campaign", "session-12"), "event"),
    "s12-vote": Fact("Session 12: the party argued about trusting the Abbess; Bram voted no.",
                     ("campaign", "session-12", "bram"), "event"),
    "s12-robes": Fact("Session 12: the Abbess gave the party black robes to pass as "
                      "novices.", ("campaign", "session-12"), "event"),
    "s12-bells": Fact("Session 12 ended on bells ringing across Vastry for Harrow's arrival.",
                      ("campaign", "session-12"), "event"),
    # -- the campaign: what one character alone knows ---------------------------------------
    "tamsin-pearl": Fact("Tamsin secretly kept one black pearl from the crown band and sold "
                         "it in Vastry.", ("campaign", "secret"), "lore", "tamsin"),
    "tamsin-heir": Fact("Tamsin is the last heir of House Heron, which Harrow destroyed.",
                        ("campaign", "secret"), "lore", "tamsin"),
    "tamsin-bribe": Fact("Tamsin saw Captain Voss take a purse from Kessick on the pier.",
                         ("campaign", "secret"), "lore", "tamsin"),
    "tamsin-code": Fact("Tamsin memorised the combination of the mint vault: three, nine, "
                        "seven.", ("campaign", "secret"), "lore", "tamsin"),
    "tamsin-letters": Fact("Tamsin has been writing to Kessick without telling the party.",
                           ("campaign", "secret"), "lore", "tamsin"),
    "tamsin-mira": Fact("Tamsin suspects Mira sold a copy of the map to Harrow.",
                        ("campaign", "secret"), "lore", "tamsin"),
    "tamsin-page": Fact("Tamsin tore the last page out of the stolen ledger and keeps it in "
                        "her boot.", ("campaign", "secret"), "lore", "tamsin"),
    "tamsin-crown-dreams": Fact("Tamsin dreams of wearing the crown every night and tells "
                                "no one.", ("campaign", "secret"), "lore", "tamsin"),
    "bram-quill": Fact("Bram knows Ser Quill was his own squire in the Border War.",
                       ("campaign", "secret"), "lore", "bram"),
    "bram-debt": Fact("Bram owes the Iron Guild 200 crowns from before the war.",
                      ("campaign", "secret"), "lore", "bram"),
    "bram-wren-rider": Fact("Bram saw Wren talking to a grey-clad rider in the Thornwood and "
                            "kept quiet.", ("campaign", "secret"), "lore", "bram"),
    "bram-abbess": Fact("Bram believes the Abbess poisoned his old captain years ago.",
                        ("campaign", "secret"), "lore", "bram"),
    "bram-ribs": Fact("Bram's ribs have not healed and he hides the pain.",
                      ("campaign", "secret"), "lore", "bram"),
    "bram-stash": Fact("Bram left a spare hammer and a bag of coin at Sergeant Dunn's house.",
                       ("campaign", "secret"), "lore", "bram"),
    "bram-hounds": Fact("Bram knows the clockwork hounds freeze at the sound of forge "
                        "bellows.", ("campaign", "secret"), "lore", "bram"),
    "bram-suspects": Fact("Bram thinks Tamsin is hiding something about the pearls.",
                          ("campaign", "secret"), "lore", "bram"),
    "wren-corvin": Fact("Wren knows Harrow's riders are led by her own brother, Corvin.",
                        ("campaign", "secret"), "lore", "wren"),
    "wren-abbess": Fact("The crows told Wren that the Abbess visits Kestrel Keep at night.",
                        ("campaign", "secret"), "lore", "wren"),
    "wren-mother": Fact("The memory Wren gave Grella was her mother's face, and she regrets "
                        "it.", ("campaign", "secret"), "lore", "wren"),
    "wren-password": Fact("The password to the Thornwood's hidden grove is 'rowan and rain'.",
                          ("campaign", "secret"), "lore", "wren"),
    "wren-crown": Fact("Wren suspects the Saltmarsh Crown is alive and calling to Tamsin.",
                       ("campaign", "secret"), "lore", "wren"),
    "wren-leave": Fact("Wren plans to leave the party once the crown is destroyed.",
                       ("campaign", "secret"), "lore", "wren"),
    "wren-maelis": Fact("Wren knows Soot was shot by Maelis.", ("campaign", "secret"),
                        "lore", "wren"),
    "odile-corra": Fact("Odile knows the masked woman is Lady Corra of House Heron, "
                        "Tamsin's aunt.", ("campaign", "secret"), "lore", "odile"),
    "odile-cargo": Fact("Odile hides Kessick's smuggled brandy in the inn's cellar.",
                        ("campaign", "secret"), "lore", "odile"),
    "odile-voss": Fact("Odile was once married to Captain Voss.", ("campaign", "secret"),
                       "lore", "odile"),
    "odile-poison": Fact("Odile overheard one of Harrow's spies plan to poison the party's "
                         "ale.", ("campaign", "secret"), "lore", "odile"),
    "odile-tunnel": Fact("A tunnel runs from the Gilded Eel's cellar down to the harbour.",
                         ("campaign", "secret"), "lore", "odile"),
    "odile-cards": Fact("Odile pays the watch to ignore her after-hours card games.",
                        ("campaign", "secret"), "lore", "odile"),
    "odile-pip": Fact("Odile knows Pip is really Captain Voss's son.", ("campaign", "secret"),
                      "lore", "odile"),
}

# A question asked later, by the key of the memory that answers it.
PARAPHRASES: dict[str, str] = {
    "sister-hannah": "what does my big sis do for a living?",
    "hannah-twins": "how many kids has my sister got?",
    "hannah-party": "on what date does my sister hit the big four-oh?",
    "luca-band": "what's the name of my little brother's group?",
    "mum-carol": "what did mum do before she stopped working?",
    "mum-greenhouse": "how does my mother spend her mornings?",
    "mum-birthday": "gift ideas for mum",
    "dad-death": "how did my father pass away?",
    "dad-boat": "what did I use to do with dad as a child?",
    "anniversary": "when did my other half and I first get together?",
    "priya-food": "is there anything my girlfriend won't eat?",
    "priya-car": "what does my partner drive?",
    "priya-sister": "what is my girlfriend's sibling going to study?",
    "in-laws": "what shop do my partner's mum and dad own?",
    "nana-rose": "how old is my gran?",
    "nana-visits": "how often do I go and see grandma?",
    "cousin-marcus": "which relative still hasn't paid me back?",
    "uncle-derek": "why do I avoid certain topics at family meals?",
    "friend-jonah": "what instrument does my closest mate play?",
    "jonah-wedding": "what role do I have at my best friend's marriage ceremony?",
    "friend-aisha": "did my uni friend have a boy or a girl?",
    "coworker-ravi": "who do I usually eat with at midday on workdays?",
    "pub-quiz": "what's our trivia night team called?",
    "board-games": "which tabletop title do we play most?",
    "dog-biscuit": "what kind of dog do I have?",
    "biscuit-fireworks": "what scares the hound on the fifth of November?",
    "biscuit-walk": "where does the dog go in the morning?",
    "biscuit-insurance": "when is the pup's cover due for renewal?",
    "cat-pickle": "how old is our cat?",
    "pickle-vet": "who looks after the cat's health?",
    "neighbour": "who can look after the cat when we're away?",
    "childhood-rabbit": "did I have any animals growing up?",
    "job": "what is my occupation?",
    "wfh": "which days am I remote?",
    "northgate": "which client's phone app am I reworking?",
    "northgate-deadline": "when does the banking client want the finished designs?",
    "promotion": "what career step am I aiming for?",
    "salary": "how much am I paid a year?",
    "impostor": "how do I feel during pitches to customers?",
    "side-project": "what app am I making in my spare time?",
    "meetup-talk": "what's my presentation in Manchester on?",
    "old-job": "where did I work previously?",
    "asthma": "do I have any breathing condition?",
    "penicillin": "which antibiotic must I avoid?",
    "knee": "how did I hurt my leg?",
    "sleep": "what's my rule about devices at bedtime?",
    "migraine": "what sets off my bad headaches?",
    "glasses": "what's my eye prescription?",
    "dentist": "when am I getting a tooth fixed?",
    "gp": "who is my family doctor?",
    "winter-low": "what do I use to lift my mood on dark mornings?",
    "coriander": "which herb should never go in my food?",
    "horror": "what kind of movies do I enjoy?",
    "le-guin": "which writer do I love most?",
    "folk": "what genre of songs am I into?",
    "football": "which team do I follow?",
    "reply-style": "how should you format answers when we chat?",
    "cheer-up": "what helps when I'm feeling down?",
    "sourdough": "what's the name of my bread culture?",
    "phone-calls": "how do I prefer people to contact me?",
    "ramen": "what do I eat when I need comforting?",
    "houseplants": "what's the big leafy plant called?",
    "japan-kyoto": "what sight am I most excited for in Japan?",
    "portuguese": "which language app am I using and why?",
    "bathroom": "who is doing the tiling?",
    "driving": "who teaches me to drive?",
    "tattoo": "what ink am I considering?",
    "allotment-crops": "what vegetables am I putting in this year?",
    "lankum-gig": "which concert have I got tickets for?",
    "money-worry": "when do I get stressed about finances?",
    "hometown": "where was I brought up?",
    "cafe": "where do I like to get coffee?",
    "university": "what did I do my degree in?",
    "cliff-walk": "what's my favourite hike on the coast?",
    "campaign": "what's our roleplay game called and who's my character?",
    "spiders": "what creatures did I ask you not to include?",
    "tamsin-dagger": "where did my character's knife come from?",
    "tamsin-swim": "what is my rogue's secret weakness?",
    "bram-hammer": "what is the smith's weapon called?",
    "bram-daughter": "does the big warrior have any children?",
    "odile-ale": "how does the innkeeper treat the guards?",
    "abbess": "is the chapel's head nun able to see?",
    "grella": "what does the swamp witch collect?",
    "admiral-password": "what phrase does the bird keep saying?",
    "quill": "what is unusual about the villain's duellist?",
    "kestrel-keep": "which way from the port is the lord's clifftop fortress?",
    "compass-lore": "what does the enchanted navigation device do?",
    "lantern-market": "when can we shop at the night bazaar?",
    "magic-licence": "what happens to unregistered wizards in the capital?",
    "s1-key": "what did my thief find in the first game?",
    "s3-crows": "how did the druid learn about the departing vessel?",
    "s4-rescue": "who saved me when I almost went under?",
    "s5-grella-trade": "what did the witch give us and at what price?",
    "s6-three-pieces": "how many parts was the artefact split into?",
    "s7-pip-scar": "how did the messenger boy get hurt?",
    "s8-ledger-theft": "where did we get the account book?",
    "s9-spies": "whose names fill the stolen records?",
    "s10-auction": "how much did we pay for the circlet?",
    "s11-soot": "what happened to the druid's bird?",
    "s12-bells": "how did the last game end?",
}

CHANGES: dict[str, Change] = {
    "mira-home": Change(
        Fact("Mira Vance lives above her map shop on Tanner's Row in Osk.",
             ("campaign", "mira"), "lore"),
        Fact("Mira moved to Vastry after the warehouse rescue and rents a room by the "
             "Lantern Market.", ("campaign", "mira"), "lore"),
        "where is the mapmaker living these days?"),
    "compass-holder": Change(
        Fact("Session 4: the Moonstone Compass was lost when the ship went down.",
             ("campaign", "items"), "event"),
        Fact("Session 9: Kessick gave back the Moonstone Compass and Bram carries it now.",
             ("campaign", "items"), "event"),
        "who has the magic needle that shows what you want?"),
    "party-gold": Change(
        Fact("The party's purse holds 440 crowns.", ("campaign", "money"), "fact"),
        Fact("After the auction the party has 140 crowns left.", ("campaign", "money"),
             "fact"),
        "how much coin does the group have?"),
    "watch-leader": Change(
        Fact("Captain Voss commands the harbour watch in Osk.", ("campaign", "voss"), "lore"),
        Fact("Voss was stripped of his rank after the ledger exposed him; Lieutenant Farrow "
             "leads the harbour watch now.", ("campaign", "voss"), "lore"),
        "who is in charge of the port guards?"),
    "kessick-ship": Change(
        Fact("Kessick captains a smuggling ship called the Grey Heron.",
             ("campaign", "kessick"), "lore"),
        Fact("Since the wreck Kessick sails a stolen cutter named the Magpie.",
             ("campaign", "kessick"), "lore"),
        "what vessel is the smuggler on now?"),
    "pip-bed": Change(
        Fact("Pip sleeps in the stables behind the Gilded Eel.", ("campaign", "pip"), "lore"),
        Fact("Pip now sleeps in the Abbess's cellar with the party.", ("campaign", "pip"),
             "lore"),
        "where does the errand boy spend the night?"),
    "wren-familiar": Change(
        Fact("Wren has had no animal companion since Soot died.", ("campaign", "wren"),
             "lore"),
        Fact("Wren bonded with a young marsh owl she calls Ash.", ("campaign", "wren"),
             "lore"),
        "what creature travels with the druid now?"),
    "crown-plan": Change(
        Fact("The party plans to sell the crown pieces to the Vastry museum.",
             ("campaign", "crown"), "plan"),
        Fact("The party decided to destroy the crown pieces in the forge at Kestrel Keep.",
             ("campaign", "crown"), "plan"),
        "what does the group mean to do with the artefact fragments?"),
    "harrow-where": Change(
        Fact("Lord Harrow rules from Kestrel Keep.", ("campaign", "harrow"), "lore"),
        Fact("Lord Harrow has ridden to Vastry to claim a council seat.",
             ("campaign", "harrow"), "lore"),
        "where is the villain at the moment?"),
    "inn-price": Change(
        Fact("Odile charges the party two silver stags a night.", ("campaign", "odile"),
             "fact"),
        Fact("Odile lets the party stay for free since they saved Pip.",
             ("campaign", "odile"), "fact"),
        "what does the innkeeper charge us for rooms?"),
    "tobin-side": Change(
        Fact("Tobin the scribe is Harrow's loyal forger.", ("campaign", "tobin"), "lore"),
        Fact("Tobin the scribe has defected and now forges papers for the party.",
             ("campaign", "tobin"), "lore"),
        "whose side is the counterfeiter on?"),
    "dunn-help": Change(
        Fact("Sergeant Dunn refused to help the party.", ("campaign", "dunn"), "event"),
        Fact("Sergeant Dunn agreed to smuggle the party out of Vastry.",
             ("campaign", "dunn"), "event"),
        "will the blacksmith's old army friend help us?"),
    "priya-job": Change(
        Fact("Priya is a paramedic with the ambulance service.", ("partner", "work"), "fact"),
        Fact("Priya left the ambulance service and now teaches first aid courses.",
             ("partner", "work"), "fact"),
        "what does my girlfriend do for work?"),
    "manager": Change(
        Fact("Sam's manager at Fernleaf is Greta.", ("work",), "fact"),
        Fact("Greta left Fernleaf; Sam now reports to a new manager called Tom.",
             ("work",), "fact"),
        "who is my boss?"),
    "physio-day": Change(
        Fact("Physio for the knee is on Tuesday evenings with Lou.", ("health", "routine"),
             "fact"),
        Fact("Knee physio moved to Saturday mornings.", ("health", "routine"), "fact"),
        "when is my physiotherapy appointment?"),
    "pickle-food": Change(
        Fact("Pickle eats Royal Canin renal dry food.", ("pets", "pickle"), "fact"),
        Fact("The vet switched Pickle to Hill's k/d wet food.", ("pets", "pickle"), "fact"),
        "what should I feed the old cat?"),
    "coffee-order": Change(
        Fact("Sam's usual coffee order is an oat flat white.", ("preferences", "food"),
             "preference"),
        Fact("Sam switched to decaf oat lattes to help with sleep.", ("preferences", "food"),
             "preference"),
        "what's my usual drink at the café?"),
    "japan-dates": Change(
        Fact("The Japan trip is planned for two weeks in October.", ("plans", "travel"),
             "plan"),
        Fact("The Japan trip was moved to April next year for the cherry blossom.",
             ("plans", "travel"), "plan"),
        "when are we going to Japan?"),
    "race-goal": Change(
        Fact("Sam aims to run the half-marathon in under two hours.", ("plans", "running"),
             "plan"),
        Fact("Because of the knee, Sam's half-marathon goal is now just to finish.",
             ("plans", "running"), "plan"),
        "what's my target time for the race in May?"),
    "home-address": Change(
        Fact("Sam lives in a rented two-bedroom flat in Headingley.", ("home",), "fact"),
        Fact("Sam and Priya moved into a rented terrace house in Chapel Allerton.",
             ("home",), "fact"),
        "where do I live?"),
    "climbing-night": Change(
        Fact("Sam goes climbing at the Depot on Wednesday nights.", ("hobbies", "routine"),
             "fact"),
        Fact("Sam's climbing night is now Friday, with Priya.", ("hobbies", "routine"),
             "fact"),
        "which evening do I go bouldering?"),
    "counselling": Change(
        Fact("Sam sees a counsellor called Ruth every Thursday at 5pm.",
             ("health", "mental-health"), "fact"),
        Fact("Sam finished weekly counselling with Ruth and now checks in once a month.",
             ("health", "mental-health"), "fact"),
        "how often do I have therapy?"),
    "driving-test": Change(
        Fact("Sam's driving test is booked for August.", ("plans", "driving"), "plan"),
        Fact("Sam passed the driving test on the second attempt.", ("driving",), "event"),
        "have I got my licence yet?"),
    "books-read": Change(
        Fact("Sam has read 8 books so far this year.", ("goals", "books"), "fact"),
        Fact("Sam is up to 14 books read this year.", ("goals", "books"), "fact"),
        "how many novels have I finished so far?"),
    "luca-study": Change(
        Fact("Sam's younger brother Luca studies architecture in Glasgow.",
             ("family", "luca"), "fact"),
        Fact("Luca dropped out of architecture and works as a sound engineer.",
             ("family", "luca"), "fact"),
        "what is my little brother doing these days?"),
    "nana-home": Change(
        Fact("Nana Rose lives in a care home in Scarborough.", ("family", "rose"), "fact"),
        Fact("Nana Rose moved to a care home in Whitby to be near Carol.",
             ("family", "rose"), "fact"),
        "where is my gran staying?"),
    "deposit": Change(
        Fact("Sam and Priya have saved £7,000 towards a deposit.", ("money", "plans"),
             "fact"),
        Fact("The deposit savings have reached £11,500.", ("money", "plans"), "fact"),
        "how much have we put aside for a home?"),
    "party-venue": Change(
        Fact("Hannah's surprise party will be at the cricket club.",
             ("family", "hannah", "plans"), "plan"),
        Fact("Hannah's party moved to the function room at the Red Lion after the cricket "
             "club double-booked.", ("family", "hannah", "plans"), "plan"),
        "where is my sister's fortieth being held?"),
    "biscuit-meds": Change(
        Fact("Biscuit takes half a Metacam tablet a day for his joints.",
             ("pets", "biscuit", "health"), "fact"),
        Fact("The vet stopped Biscuit's Metacam; he has joint supplements instead.",
             ("pets", "biscuit", "health"), "fact"),
        "what does the greyhound take for his hips?"),
    "gym": Change(
        Fact("Sam has a council gym membership but rarely goes.", ("health", "money"),
             "fact"),
        Fact("Sam cancelled the gym membership to save money.", ("health", "money"), "fact"),
        "am I still paying for a fitness club?"),
}

NEAR_DUPLICATES: dict[str, Pair] = {
    "dup-biscuit": Pair("dog-biscuit", "Sam adopted a retired racing greyhound named Biscuit "
                        "in 2021."),
    "dup-penicillin": Pair("penicillin", "Penicillin causes an allergic reaction in Sam "
                           "(hives)."),
    "dup-coriander": Pair("coriander", "Sam can't stand coriander, says it tastes of soap."),
    "dup-twins": Pair("hannah-twins", "Sam's sister Hannah is mum to twins, Ollie and Fern, "
                      "aged six."),
    "dup-birthday": Pair("birthday", "Sam was born on the third of August."),
    "dup-dad": Pair("dad-death", "Sam lost their father Peter to a heart attack in March "
                    "2019, so that month is tough."),
    "dup-job": Pair("job", "Sam works as a UX designer for Fernleaf Studio, a small agency "
                    "of twelve people."),
    "dup-lactose": Pair("lactose", "Sam can't have dairy because of lactose intolerance; "
                        "oat milk instead."),
    "dup-asthma": Pair("asthma", "Sam has a mild form of asthma and brings the blue inhaler "
                       "on runs."),
    "dup-horror": Pair("horror", "Sam is a big fan of slow, atmospheric horror such as "
                       "Hereditary and The Witch."),
    "dup-anniversary": Pair("anniversary", "Sam and Priya met at a pub quiz in 2018 and "
                            "celebrate on 14 March."),
    "dup-kyoto": Pair("japan-kyoto", "The Kyoto moss gardens are top of Sam's wish list for "
                      "Japan."),
    "dup-portuguese": Pair("portuguese", "Sam practises Portuguese with Duolingo ahead of "
                           "Jonah's wedding."),
    "dup-sourdough": Pair("sourdough", "Sam's sourdough starter is called Gerald."),
    "dup-carol": Pair("mum-carol", "Carol, Sam's mother, used to teach primary school and "
                      "is retired in Whitby."),
    "dup-dagger": Pair("tamsin-dagger", "Whisper, Tamsin's dagger, belonged to her mother."),
    "dup-hammer": Pair("bram-hammer", "Old Ember, Bram's warhammer, gives off a faint glow "
                       "when magic is near."),
    "dup-wren": Pair("wren", "Wren, a Thornwood druid, can speak with birds."),
    "dup-odile": Pair("odile", "Odile, who keeps the Gilded Eel in Osk, hears all the "
                      "gossip of the harbour."),
    "dup-chapel": Pair("chapel-tide", "You can get into the Drowned Chapel only when the "
                       "tide is out."),
    "dup-compass": Pair("compass-lore", "The Moonstone Compass points its holder toward "
                        "what they desire most."),
    "dup-wreck": Pair("s4-wreck", "In session 4 a storm sank the Grey Heron near the "
                      "Saltmarsh, but Kessick lived."),
    "dup-duel": Pair("s10-duel", "Session 10: Bram defeated Ser Quill in single combat and "
                     "came away with two broken ribs."),
    "dup-soot": Pair("s11-soot", "Session 11: Wren's crow Soot was shot dead by an archer at "
                     "Kestrel Keep."),
    "dup-thornwood": Pair("thornwood", "Iron tools rust in a single night in the old "
                          "Thornwood."),
    "dup-lantern": Pair("lantern-market", "The Lantern Market in Vastry only opens once the "
                        "sun has set."),
    "dup-kessick": Pair("kessick", "Kessick the smuggler has a gold tooth and a parrot "
                        "called Admiral."),
    "dup-key": Pair("s1-key", "Session 1: Tamsin opened the lock of a sea chest and found a "
                    "silver key with a heron engraved on it."),
    "dup-spiders": Pair("spiders", "No spiders in the story, Sam asked."),
    "dup-games": Pair("board-games", "Sam runs a board-game night the last Saturday of every "
                      "month, and Wingspan is the favourite."),
}

RELATED: dict[str, Pair] = {
    "rel-hannah": Pair("sister-hannah", "Hannah's husband Dean is a firefighter in Bristol."),
    "rel-luca": Pair("luca-band", "Static Hymn play their first gig at the Hug and Pint on "
                     "4 May."),
    "rel-greenhouse": Pair("mum-greenhouse", "The February storm blew the roof off Carol's "
                           "greenhouse."),
    "rel-peter": Pair("dad-boat", "Peter supported Middlesbrough and took Sam to matches."),
    "rel-rose": Pair("nana-visits", "Nana Rose always asks Sam to bring liquorice "
                     "allsorts."),
    "rel-jonah": Pair("friend-jonah", "Jonah is allergic to cats, so he won't visit when "
                      "Pickle is in."),
    "rel-aisha": Pair("friend-aisha", "Aisha goes back to work as a solicitor in June."),
    "rel-hoover": Pair("biscuit-fireworks", "Biscuit is scared of the hoover too."),
    "rel-pickle": Pair("cat-pickle", "Pickle likes to sleep on the radiator shelf."),
    "rel-okafor": Pair("pickle-vet", "Dr Okafor says Biscuit needs his teeth cleaned."),
    "rel-ravi": Pair("coworker-ravi", "Ravi is leaving Fernleaf for a job in Berlin this "
                     "summer."),
    "rel-northgate": Pair("northgate-deadline", "The Northgate client wants a dark mode "
                          "added to the redesign."),
    "rel-migraine": Pair("migraine", "Sam's migraines usually start behind the left eye."),
    "rel-glasses": Pair("glasses", "Sam wears contact lenses for climbing."),
    "rel-football": Pair("football", "Jonah supports Sheffield Wednesday, which causes "
                         "arguments."),
    "rel-guitar": Pair("guitar", "Sam wants to learn fingerpicking for 'Blackbird'."),
    "rel-half": Pair("half-marathon", "Priya is running the half-marathon too, as Sam's "
                     "pacer."),
    "rel-allotment": Pair("allotment-crops", "Slugs ate all of Sam's lettuces on the "
                          "allotment last summer."),
    "rel-lankum": Pair("lankum-gig", "Sam saw Lankum live once before, in Manchester in "
                       "2022."),
    "rel-ledger": Pair("s9-spies", "The ledger also records payments from Harrow to the "
                       "Sisters of the Tide."),
    "rel-pip": Pair("pip", "Pip can't read but repeats every message word for word."),
    "rel-grella": Pair("grella", "Grella's hut stands on stilts in the middle of the "
                       "Saltmarsh."),
    "rel-harrow": Pair("harrow", "Harrow's banner is a grey kestrel on black."),
    "rel-osk": Pair("osk", "Osk's fish market opens at dawn on the harbour front."),
    "rel-mira": Pair("s9-mira-rescue", "Session 9: after the rescue Mira swore to repay the "
                     "party."),
    "rel-abbess": Pair("abbess", "The Abbess Sefa was a sea captain before she took her "
                       "vows."),
    "rel-crown": Pair("crown-power", "The Saltmarsh Crown was forged by the sea-witch Ondra "
                      "three centuries ago."),
    "rel-dunn": Pair("dunn", "Sergeant Dunn has a wooden leg from the Border War."),
    "rel-auction": Pair("s10-bluff", "Session 10: the auction was held in the Vastry "
                        "Guildhall and went on all night."),
    "rel-combat": Pair("combat-style", "Sam wants fights to have real stakes; characters "
                       "can die."),
}

UNANSWERABLE: dict[str, Unanswerable] = {
    "u-luca-girlfriend": Unanswerable("what's my brother's girlfriend called?", "luca-band"),
    "u-twins-school": Unanswerable("which school do the twins go to?", "hannah-twins"),
    "u-dad-work": Unanswerable("what did my dad do for a living?", "dad-boat"),
    "u-jonah-dog": Unanswerable("what breed is Jonah's dog?", "friend-jonah"),
    "u-biscuit-weight": Unanswerable("how much does Biscuit weigh?", "dog-biscuit"),
    "u-cholesterol": Unanswerable("what was my cholesterol at the last blood test?", "gp"),
    "u-airline": Unanswerable("which airline are we flying to Japan with?", "japan-kyoto"),
    "u-northgate-pm": Unanswerable("who is the project manager on the Northgate side?",
                                   "northgate"),
    "u-car-wish": Unanswerable("what car do I want to buy once I can drive?", "driving"),
    "u-priya-film": Unanswerable("what is Priya's favourite film?", "horror"),
    "u-luca-birthday": Unanswerable("when is Luca's birthday?", "birthday"),
    "u-bedroom-paint": Unanswerable("what colour are we painting the bedroom?", "colour"),
    "u-wedding-hotel": Unanswerable("which hotel are we staying at in Lisbon for the "
                                    "wedding?", "jonah-wedding"),
    "u-carol-wine": Unanswerable("what wine does mum like?", "mum-birthday"),
    "u-priya-uni": Unanswerable("where did Priya go to university?", "priya-bouldering"),
    "u-priya-team": Unanswerable("which football team does Priya support?", "football"),
    "u-tamsin-father": Unanswerable("what was Tamsin's father's name?", "tamsin-dagger"),
    "u-vastry-guards": Unanswerable("how many guards patrol the walls of Vastry?", "vastry"),
    "u-odile-cat": Unanswerable("what is the name of the innkeeper's cat?", "odile"),
    "u-abbess-god": Unanswerable("which god does the Abbess pray to?", "sisters-tide"),
    "u-kessick-name": Unanswerable("what is Kessick's real name?", "kessick"),
    "u-bram-age": Unanswerable("how old is Bram?", "bram"),
    "u-dead-language": Unanswerable("what language do the drowned dead speak?",
                                    "crown-power"),
    "u-auction-food": Unanswerable("what was served to eat at the auction?", "s10-auction"),
    "u-keep-builder": Unanswerable("who built Kestrel Keep?", "kestrel-keep"),
    "u-mira-assistant": Unanswerable("what's the name of Mira's apprentice?", "mira"),
    "u-third-piece": Unanswerable("what does the third piece of the crown look like?",
                                  "s11-letter"),
    "u-charcoal-gift": Unanswerable("what did the charcoal burners give the party?",
                                    "s7-charcoal"),
    "u-grella-name": Unanswerable("what is Grella's true name?", "grella"),
    "u-osk-distance": Unanswerable("how many days is it from Osk to Vastry by road?",
                                   "vastry"),
}

SCOPE_QUERIES: dict[str, ScopeQuery] = {
    "sq-masked": ScopeQuery("tamsin", "who is the masked woman asking about the heron's heir?",
                            "odile-corra"),
    "sq-riders": ScopeQuery("tamsin", "who leads the grey riders?", "wren-corvin"),
    "sq-tunnel": ScopeQuery("tamsin", "is there a secret way from the inn down to the docks?",
                            "odile-tunnel"),
    "sq-hounds": ScopeQuery("tamsin", "how do we get past the mechanical guard dogs?",
                            "bram-hounds"),
    "sq-quill": ScopeQuery("tamsin", "does Bram know Harrow's champion from before?",
                           "bram-quill"),
    "sq-abbess-night": ScopeQuery("tamsin", "does the Abbess go to Harrow's castle?",
                                  "wren-abbess"),
    "sq-cellar": ScopeQuery("tamsin", "what is Odile hiding downstairs?", "odile-cargo"),
    "sq-rider-meeting": ScopeQuery("tamsin", "has Wren been meeting Harrow's men in secret?",
                                   "bram-wren-rider"),
    "sq-code": ScopeQuery("bram", "what numbers open the vault under the mint?",
                          "tamsin-code"),
    "sq-letters": ScopeQuery("bram", "who has Tamsin been writing to?", "tamsin-letters"),
    "sq-crow-killer": ScopeQuery("bram", "who killed the crow?", "wren-maelis"),
    "sq-poison": ScopeQuery("bram", "is someone going to poison our drinks?", "odile-poison"),
    "sq-pearl": ScopeQuery("bram", "what did the thief do with the missing pearl?",
                           "tamsin-pearl"),
    "sq-grella-price": ScopeQuery("bram", "what exactly did the druid give the marsh hag?",
                                  "wren-mother"),
    "sq-calling": ScopeQuery("bram", "is the crown calling to anyone?", "wren-crown"),
    "sq-map-seller": ScopeQuery("bram", "who sold the copied map to Harrow?", "tamsin-mira"),
    "sq-bribe": ScopeQuery("wren", "did the watch captain take money from the smuggler?",
                           "tamsin-bribe"),
    "sq-bram-debt": ScopeQuery("wren", "what does the blacksmith owe and to whom?",
                               "bram-debt"),
    "sq-odile-husband": ScopeQuery("wren", "who was the innkeeper's husband?", "odile-voss"),
    "sq-pip-father": ScopeQuery("wren", "whose child is the errand boy?", "odile-pip"),
    "sq-stash": ScopeQuery("wren", "where did Bram hide his money?", "bram-stash"),
    "sq-page": ScopeQuery("wren", "what happened to the last page of the ledger?",
                          "tamsin-page"),
    "sq-bram-suspects": ScopeQuery("wren", "what does Bram suspect about Tamsin?",
                                   "bram-suspects"),
    "sq-heir": ScopeQuery("odile", "is the thief of noble blood?", "tamsin-heir"),
    "sq-wren-leave": ScopeQuery("odile", "does Wren mean to stay with the others?",
                                "wren-leave"),
    "sq-grove": ScopeQuery("odile", "what's the password to the druids' secret grove?",
                           "wren-password"),
    "sq-ribs": ScopeQuery("odile", "is the big man still hurt from the duel?", "bram-ribs"),
    "sq-old-captain": ScopeQuery("odile", "who does Bram blame for his old captain's death?",
                                 "bram-abbess"),
    "sq-dreams": ScopeQuery("odile", "what does Tamsin dream about at night?",
                            "tamsin-crown-dreams"),
    "sq-voss-purse": ScopeQuery("odile", "has anyone seen Voss take a bribe?",
                                "tamsin-bribe"),
}


# Questions a user might put to the same companion about things outside its memories' world
# altogether (no name, place or topic in common): where a "nothing found" must be said.
OFF_TOPIC: dict[str, str] = {
    "o-router": "how do I reset the wifi router's admin password?",
    "o-peru": "what is the capital city of Peru?",
    "o-sourdough": "what hydration should a sourdough starter have?",
    "o-tax": "when is the deadline for filing a self-assessment tax return?",
    "o-python": "how do I reverse a list in Python?",
    "o-moon": "how far away is the moon from the earth?",
    "o-tyres": "what pressure should the car's tyres be at?",
    "o-chess": "what is the best reply to the Sicilian defence?",
    "o-vinegar": "can vinegar clean limescale off a kettle?",
    "o-guitar": "how do you tune a guitar to drop D?",
    "o-stock": "what did the stock market do yesterday?",
    "o-photosynthesis": "which gas do plants release during photosynthesis?",
    "o-knots": "how do you tie a bowline knot?",
    "o-printer": "why does the printer say it is offline?",
    "o-marathon": "how many miles is a marathon?",
}

def split(keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """The keys of one list in its development part and its held-out third, each in the
    given order. The keys are sorted before a seeded shuffle, so the split depends on the
    list's keys alone, never on the order they were written in."""
    given = list(keys)
    shuffled = sorted(given)
    random.Random(SPLIT_SEED).shuffle(shuffled)
    held = set(shuffled[: len(given) // 3])
    return [k for k in given if k not in held], [k for k in given if k in held]
