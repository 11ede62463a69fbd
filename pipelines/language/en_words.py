"""The English pack's function and time words: who a pronoun points at, which words mark a
change, a habit, a plan, a wish, a negation, and the contractions typed without an
apostrophe ("im", "ive")."""

from __future__ import annotations

import re

from sleepmem.pipelines.language.words import Phrases

FIRST_PERSON = frozenset({"i", "we", "me", "us", "my", "our", "mine", "ours", "myself",
                          "ourselves"})
SECOND_PERSON = frozenset({"you", "your", "yours"})
# Nouns of people: "my sister lives in Rome" is the sister's fact, "my flat" the speaker's.
# Interjections of typed chat, which say how something is said, not what.
CHAT_WORDS = Phrases(["lol", "lmao", "lmfao", "rofl", "haha", "hahaha", "hehe", "tbh", "ngl",
                      "imo", "imho", "smh", "xd"])
PERSON_NOUNS = frozenset({
    "mom", "mum", "mother", "dad", "father", "parent", "sister", "brother", "sibling", "son",
    "daughter", "kid", "child", "baby", "wife", "husband", "partner", "spouse", "boyfriend",
    "girlfriend", "fiance", "fiancee", "friend", "buddy", "roommate", "flatmate", "colleague",
    "coworker", "boss", "manager", "neighbor", "neighbour", "grandma", "grandpa",
    "grandmother", "grandfather", "aunt", "uncle", "cousin", "niece", "nephew", "teacher",
    "doctor", "ex", "mate", "team", "teammate", "family", "twin", "stepson", "stepdaughter",
    "he", "she", "they", "him", "her", "them",
})
THIRD_PRONOUNS = frozenset({"he", "she", "they"})
HYPOTHETICAL_MARKS = frozenset({"if", "unless", "suppose", "supposing", "whether", "imagine",
                                "assuming"})
# Time words that say the clause holds from now on, or holds no longer.
CHANGE_WORDS = frozenset({"now", "nowadays", "anymore", "longer", "lately", "recently",
                          "currently", "forward", "henceforth", "new", "switch", "finally",
                          "instead", "since"})
CHANGE_PHRASES = ("from now on", "these days", "going forward", "from today", "any more",
                  "no longer", "these day", "from here on", "moving forward", "not anymore")
HABIT_WORDS = frozenset({"always", "usually", "often", "every", "whenever", "generally",
                         "normally", "typically", "never", "each", "daily", "weekly"})
FUTURE_WORDS = frozenset({"will", "'ll", "shall", "tomorrow", "next", "soon", "someday",
                          "plan", "planning", "gonna", "might", "maybe", "perhaps"})
TIME_NOUNS = frozenset({"day", "days", "week", "weeks", "month", "months", "year", "years",
                        "time", "now", "today", "tonight", "morning", "evening", "weekend"})
# Verbs whose past is a state that holds now: "we moved to Porto", "she started at Maple".
STATE_CHANGE_VERBS = frozenset({"move", "relocate", "start", "join", "switch", "quit", "leave",
                                "adopt", "buy", "sell", "become", "marry", "graduate",
                                "transfer", "retire", "enroll", "enrol", "settle", "change",
                                "give", "stop", "sign", "land", "get", "take", "begin",
                                "unpack", "convert", "divorce", "rescue"})
MOMENT_PHRASES = ("today", "tonight", "this week", "this weekend", "this morning",
                  "this afternoon", "this evening", "right now", "at the moment", "for now",
                  "this month", "this time", "at the minute")
# What a moment after it makes a start that holds from then on: "starting this week",
# "as of today", "beginning this month" (where "this week" alone is for now).
START_WORDS = ("starting", "beginning", "as of", "effective", "from")
# Verbs of the mind: "I think Python is great" is an opinion of the moment, not a fact.
MENTAL_VERBS = frozenset({"think", "guess", "feel", "believe", "suppose", "wonder", "hope",
                          "know", "mean", "agree", "understand", "remember", "forget", "see",
                          "notice", "doubt", "reckon", "bet", "assume", "realize", "realise",
                          "appreciate", "imagine", "say", "tell", "ask", "thank"})
# A passing state: "happy with the answer", "not sure what to eat".
FEELINGS = frozenset({"happy", "sad", "tired", "sure", "glad", "excited", "sorry", "busy",
                      "confused", "worried", "ok", "okay", "fine", "good", "great", "bored",
                      "hungry", "thirsty", "sleepy", "upset", "angry", "curious", "ready",
                      "nervous", "stressed", "exhausted", "done", "lost", "stuck", "late",
                      "early", "back", "free", "available", "right", "wrong", "correct",
                      "interested", "impressed", "grateful", "thankful", "well"})
# Nouns that name the talk itself: "my question is …", "my problem is that …".
TALK_NOUNS = frozenset({"question", "problem", "issue", "point", "idea", "guess", "concern",
                        "thought", "worry", "request", "task", "answer", "reply", "message",
                        "bad", "mistake", "fault", "turn", "pleasure", "understanding",
                        "opinion", "feeling", "impression", "suggestion", "plan", "goal",
                        "bet", "hope", "wish", "take"})
DEMONSTRATIVES = frozenset({"this", "that", "these", "those", "it", "them", "one", "ones"})
# Verbs that end what their object was: "left Globex", "sold the Civic", "quit coffee".
ENDING_VERBS = frozenset({"leave", "quit", "sell", "stop", "divorce", "drop", "cancel",
                          "ditch", "abandon", "lose", "resign", "retire", "exit"})
# Phrasal verbs whose verb alone ends nothing: "gave up tea", "went off coffee", "cut out
# sugar", "swore off beer" (verb lemma, particle).
ENDING_PHRASALS = frozenset({("give", "up"), ("go", "off"), ("cut", "out"), ("swear", "off"),
                             ("pack", "in"), ("drop", "out"), ("phase", "out")})
COMPARATIVES = frozenset({"more", "rather", "better", "sooner"})
WISH_HEADS = frozenset({"want", "like", "wish", "prefer", "love", "hope", "need", "request"})
# Modals that state a plan ("we'll move next year"); the others say what may or should be
# ("we should meet on Thursday", "I'd buy a boat"), which is nobody's history.
PLAN_MODALS = frozenset({"will", "'ll", "shall", "wo"})
REQUEST_AUX = frozenset({"could", "can", "would", "will"})
NEGATIONS = frozenset({"not", "n't", "never", "no", "nor", "neither", "nobody", "nothing"})
# The little words a value span never needs.
VALUE_SKIP = frozenset({"DET", "PRON", "PUNCT", "CCONJ", "SCONJ", "PART", "INTJ"})
LIGHT_HEADS = frozenset({"be", "have", "get", "do"})


# Contractions typed without their apostrophe, and "-in" for "-ing": each no other
# English word.
CONTRACTIONS = {
    "im": "I'm", "ive": "I've", "dont": "don't", "doesnt": "doesn't", "didnt": "didn't",
    "isnt": "isn't", "arent": "aren't", "wasnt": "wasn't", "werent": "weren't",
    "havent": "haven't", "hasnt": "hasn't", "hadnt": "hadn't", "couldnt": "couldn't",
    "wouldnt": "wouldn't", "shouldnt": "shouldn't", "thats": "that's", "whats": "what's",
    "theres": "there's", "youre": "you're", "theyre": "they're", "weve": "we've",
    "youve": "you've", "theyve": "they've", "ima": "I'm going to", "aint": "ain't",
    # The "-ing" typed without its "g", which the small parser reads as nouns ("doin").
    **{w[:-1]: w for w in (
        "doing", "going", "getting", "making", "taking", "working", "living", "thinking",
        "looking", "trying", "saying", "coming", "running", "playing", "having", "starting",
        "moving", "feeling", "talking", "watching", "waiting", "walking", "cooking",
        "learning", "studying", "driving", "eating", "nothing", "something")},
}
BARE_CONTRACTION = re.compile(r"(?i)\b(?:" + "|".join(CONTRACTIONS) + r")\b(?!['’])")


def restored(word: str) -> str:
    if len(word) > 1 and word.isupper():
        return word  # "IM me later", "DONT" shouted: left as written
    full = CONTRACTIONS[word.lower()]
    return full if full.startswith("I") or word.islower() else full[0].upper() + full[1:]

