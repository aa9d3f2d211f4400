"""An English long-conversation evaluation: multi-session chats saved one turn per memory.

Four conversations between two people each, over several dated sessions (the kind of history an
assistant keeps about a user and the people around them), written for this project. Every turn is
saved as one memory, ``[<session date>] <speaker>: <text>``, the way a long-term conversational
memory benchmark saves dialogue turns. The questions carry their labelled evidence turns:

* ``single``: the answer is one turn, asked in other words or other word forms than the turn's;
* ``multi``: the answer needs several turns (all of them are the evidence);
* ``date``: when something happened (the evidence turn's session date answers it), or what
  happened at a named date;
* ``wrong``: the question names the other speaker (the one who did *not* do it); the evidence is
  the turn where the right person did — retrieval should still find it;
* ``none``: nothing in that conversation is about it: a good search returns nothing.

Used by `tests/test_semantic_eval.py` and `scripts/bench.py --semantic`; each conversation goes
into its own store (one user's history with one person), searched in its global scope.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tests.helpers.semantic_corpus import EVAL_BUDGET

if TYPE_CHECKING:
    from dsh_memory_mcp.config import VectorSettings
    from dsh_memory_mcp.search.vectors import VectorChannel
    from dsh_memory_mcp.store.shared import SharedStore

# Each conversation: speakers (initial → name) and sessions (date, turns). A turn is
# "<initial>: text" or "<initial>#<label>: text"; labelled turns are the evidence questions name.
_CONVERSATIONS: dict[str, tuple[dict[str, str], list[tuple[str, list[str]]]]] = {
    "maya-jordan": (
        {"M": "Maya", "J": "Jordan"},
        [
            (
                "4 March 2023",
                [
                    "M: Hey Jordan! Long time no talk. How have you been?",
                    "J: Maya! I've been good, just really busy with the new job at the design studio.",
                    "M#signup: Nice! I have news too: I signed up for the city half marathon in June.",
                    "J: A half marathon? That's amazing. Have you ever run that far?",
                    "M: Never. The longest I've done is about eight kilometres, so I'm following a beginner plan.",
                    "J: How many days a week are you training?",
                    "M#plan: Four runs a week, and a long one every Sunday morning along the river.",
                    "J: I could never get up that early on a Sunday.",
                    "M: Ha, it's easier than it sounds once you have coffee waiting at home.",
                    "J#cello: Speaking of new things, I started taking cello lessons last month.",
                    "M: Cello! Where did that come from?",
                    "J#cello2: My grandmother played it, and I found her old instrument in my parents' attic.",
                    "M: That's so lovely. Is it hard?",
                    "J: My fingers hurt constantly, but my teacher says that goes away.",
                    "M: Well, I expect a concert eventually.",
                    "J: Deal, once I can play more than scales.",
                ],
            ),
            (
                "19 April 2023",
                [
                    "J: How's the running going?",
                    "M#injury: Not great this week, I twisted my ankle on a tree root during the long run.",
                    "J: Oh no! Is it bad?",
                    "M#physio: The physiotherapist said it's a mild sprain, two weeks of rest and then easy jogging.",
                    "J: At least it's not broken. Will you still make it to the race?",
                    "M: I think so, the plan has some slack built in.",
                    "J#move: I have news as well: I'm moving to a new apartment at the end of May.",
                    "M: Where to?",
                    "J#move2: Across town, near the botanical garden. It has a small balcony and much more light.",
                    "M: You've been wanting a balcony forever.",
                    "J: I'm already planning to grow tomatoes and herbs out there.",
                    "M: Let me know if you need help carrying boxes.",
                    "J: I will definitely take you up on that.",
                    "M: As long as the cello case is not my job.",
                    "J: Ha, no, nobody touches the cello but me.",
                ],
            ),
            (
                "11 June 2023",
                [
                    "M#race: I did it! I finished the half marathon this morning in two hours and eight minutes.",
                    "J: Maya, that's incredible! Congratulations!",
                    "M: My legs are jelly, but I'm so proud.",
                    "J: How was the ankle?",
                    "M: It held up fine, I taped it just in case.",
                    "J: What was the hardest part?",
                    "M#race2: Kilometre eighteen. There was a long hill and I almost walked, but a stranger cheered my name.",
                    "J: That's the best feeling.",
                    "M: What about you, are you settled in the new place?",
                    "J#boxes: Mostly. There are still boxes everywhere, but the balcony is set up with a little table.",
                    "M: Any tomatoes yet?",
                    "J: Tiny green ones. I'm checking on them every day like a worried parent.",
                    "M: You'll have a salad by August.",
                    "J: I hope so. I also finally learned my first real piece on the cello.",
                    "M: Which one?",
                    "J#piece: The prelude from Bach's first cello suite, very slowly.",
                ],
            ),
            (
                "2 September 2023",
                [
                    "M#dog: Big news, we adopted a dog from the shelter last weekend!",
                    "J: No way! What kind of dog?",
                    "M#dog2: A three-year-old beagle mix called Pepper. She's very food motivated.",
                    "J: Beagles are so sweet. How is she settling in?",
                    "M: She's great, but she howls when we leave the apartment.",
                    "J: Have you tried leaving the radio on?",
                    "M#trainer: We hired a trainer who suggested short absences and a puzzle feeder.",
                    "J: Smart. Can I meet her soon?",
                    "M: Of course, come over next weekend.",
                    "J#recital: I can bring cookies. Oh, and my teacher invited me to play in the student recital in November.",
                    "M: That's huge! Are you nervous?",
                    "J: Extremely. I'll be playing the Bach prelude, hopefully faster this time.",
                    "M: Pepper and I will be in the front row.",
                    "J: Maybe leave Pepper at home, she might howl along.",
                ],
            ),
            (
                "26 November 2023",
                [
                    "M: So? How did the recital go yesterday?",
                    "J#recital2: Honestly better than I expected. I made one mistake in the middle but kept going.",
                    "M: Nobody noticed, I promise. It sounded beautiful.",
                    "J: My grandmother's cello sounded amazing in that hall.",
                    "M: She would have loved it.",
                    "J: How's Pepper?",
                    "M#pepper: She can stay alone for three hours now without howling. The trainer was worth it.",
                    "J: That's real progress.",
                    "M#nextrace: I'm thinking about running a full marathon next year, in Berlin.",
                    "J: A full one? You're braver than me.",
                    "M: We'll see. First I need to get through the winter training.",
                    "J#harvest: My balcony tomatoes are done for the year. I ended up picking almost four kilos.",
                    "M: Four kilos from a balcony! Impressive.",
                    "J: I made sauce and froze most of it.",
                    "M: Save me a jar.",
                ],
            ),
        ],
    ),
    "priya-tom": (
        {"P": "Priya", "T": "Tom"},
        [
            (
                "14 January 2024",
                [
                    "P: Tom, happy new year! How were the holidays?",
                    "T#daughter: Quiet but nice. My daughter Lily turned seven on New Year's Eve, so we had a double party.",
                    "P: A birthday on New Year's Eve, that's fun.",
                    "T: She thinks the fireworks are for her.",
                    "P#bakery: I made a big decision over the break: I'm going to sell sourdough at the Saturday market.",
                    "T: Finally! Your bread is the best I've ever had.",
                    "P: Thanks. I'll start small, maybe twenty loaves a week.",
                    "T: Do you need a licence for that?",
                    "P#licence: Yes, I applied for the food hygiene certificate. The inspection is next month.",
                    "T: Good luck with it.",
                    "P: How's your garden surviving the frost?",
                    "T#greenhouse: I built a small greenhouse out of old windows, so the seedlings are cosy.",
                    "P: You built it yourself?",
                    "T: With a lot of help from online videos.",
                ],
            ),
            (
                "18 February 2024",
                [
                    "P#inspection: I passed the kitchen inspection on Thursday! Top hygiene rating.",
                    "T: Congratulations, I knew you would.",
                    "P: So the first market day is the second of March.",
                    "T: Lily and I will come. She wants a cinnamon roll.",
                    "P: I'll save one for her.",
                    "T#japan: We're also planning a family trip to Japan in April, for the cherry blossoms.",
                    "P: Oh, how wonderful. Where will you go?",
                    "T#japan2: Tokyo for four days, then Kyoto, and a day trip to Nara to see the deer.",
                    "P: Lily will love the deer.",
                    "T: She's already practising bowing to them.",
                    "P: Have you booked everything?",
                    "T: Flights yes, hotels mostly. I still need the train passes.",
                    "P: Get the passes before you leave, it's easier.",
                    "T: Noted, thank you.",
                ],
            ),
            (
                "9 March 2024",
                [
                    "T: How was the first market day?",
                    "P#soldout: I sold out in two hours! All twenty-four loaves and the cinnamon rolls.",
                    "T: That's fantastic. Sorry we missed it, Lily had a fever.",
                    "P: Oh no, is she better?",
                    "T: Yes, it was just a cold. She was sad to miss the roll.",
                    "P: I'll drop one off this week.",
                    "P#oven: I think I need a second oven. I was up at three in the morning baking.",
                    "T: That sounds exhausting.",
                    "P: It is, but I loved talking to the customers.",
                    "T#seedlings: My tomato and pepper seedlings are already twenty centimetres tall in the greenhouse.",
                    "P: Already? You'll have an early harvest.",
                    "T: If the slugs don't get them first.",
                    "P#beer: Beer traps work, my mother swears by them.",
                    "T: I'll try anything at this point.",
                ],
            ),
            (
                "28 April 2024",
                [
                    "P: Welcome back! How was Japan?",
                    "T#trip: Magical. The blossoms in Kyoto were at their peak, and Lily fed the deer in Nara.",
                    "P: Did she bow to them?",
                    "T: She did, and one bowed back. She's still talking about it.",
                    "T#lost: The only drama was when I left my wallet on the train to Kyoto.",
                    "P: Oh no! Did you get it back?",
                    "T#lost2: Yes, the lost property office had it the next morning, with every yen still inside.",
                    "P: Only in Japan.",
                    "P#partner: Meanwhile I found a business partner, my cousin Anita. She'll do the pastries.",
                    "T: A family business, I love it.",
                    "P#oven2: We bought a second-hand deck oven from a bakery that closed. It fits forty loaves.",
                    "T: Forty! You're growing fast.",
                    "P: A little scary, but exciting.",
                ],
            ),
            (
                "16 June 2024",
                [
                    "T#school: Lily finished first grade this week. She got an award for reading.",
                    "P: Tell her congratulations from me!",
                    "T: She read forty books this year, mostly about dragons.",
                    "P: A girl of taste.",
                    "P#cafe: Anita and I are looking at a small shop to open a café next spring.",
                    "T: From a market stall to a café in a year and a half?",
                    "P: If the bank says yes. We have a meeting on Tuesday.",
                    "T: Fingers crossed.",
                    "T#harvest: The greenhouse is giving me more tomatoes than we can eat.",
                    "P: Bring some to the market, I'll put them next to the focaccia.",
                    "T: That would be a fun swap: tomatoes for bread.",
                    "P: Deal.",
                    "T#slugs: And the beer traps worked, by the way. Tell your mother thanks.",
                    "P: She'll be delighted.",
                ],
            ),
        ],
    ),
    "elena-sam": (
        {"E": "Elena", "S": "Sam"},
        [
            (
                "7 May 2023",
                [
                    "S: Hi sis, are you coming to Grandma's birthday lunch on the twentieth?",
                    "E: Of course! It's her ninetieth, I wouldn't miss it.",
                    "S#gift: I'm making her a wooden jewellery box in my workshop.",
                    "E: That's so thoughtful. What wood?",
                    "S#walnut: Walnut, with her initials carved in the lid.",
                    "E: She'll cry, you know that.",
                    "E#shelter: I started volunteering at the animal shelter on Saturdays.",
                    "S: That's great, you've always loved animals.",
                    "E#cats: Mostly I help with the cats: feeding, cleaning, and socialising the shy ones.",
                    "S: Careful, you'll come home with five of them.",
                    "E: Too late, I'm already attached to a grey one called Smokey.",
                    "S: I knew it.",
                ],
            ),
            (
                "21 May 2023",
                [
                    "E: Wasn't yesterday lovely?",
                    "S#lunch: It was. Grandma laughed the whole afternoon.",
                    "E#box: And she cried at the jewellery box, just as I predicted.",
                    "S: She said she'll keep her wedding ring in it.",
                    "E: Did you hear her story about meeting Grandpa at the dance hall?",
                    "S: For the hundredth time, and I still love it.",
                    "S#interview: By the way, I have a job interview next week, at the furniture company in the harbour district.",
                    "E: What's the position?",
                    "S#position: Workshop supervisor. I'd be in charge of eight carpenters.",
                    "E: You'd be perfect for that.",
                    "S: I'm nervous about the technical test.",
                    "E: You've been building things since you were ten. You'll be fine.",
                ],
            ),
            (
                "3 July 2023",
                [
                    "S#job: I got the job! I start on the first of August.",
                    "E: Sam! I'm so happy for you!",
                    "S: The technical test was making a dovetail joint in forty minutes. I finished in thirty.",
                    "E: Show-off.",
                    "S: What's new at the shelter?",
                    "E#adopt: I adopted Smokey. He's been living with me for a week now.",
                    "S: Of course you did.",
                    "E#hide: He spent the first three days hiding under the sofa, but now he sleeps on my feet.",
                    "S: That's how they win you over.",
                    "E#fundraiser: The shelter is also organising a fundraiser in September, a dog walk in the park.",
                    "S: Put me down for that.",
                    "E: You don't have a dog.",
                    "S: I'll borrow one.",
                ],
            ),
            (
                "17 September 2023",
                [
                    "E#raised: The fundraiser raised over six thousand euros, a record for the shelter!",
                    "S: That's amazing. Sorry I couldn't walk, the first month at work was chaos.",
                    "E: How is the new job?",
                    "S#team: Good but intense. One of my carpenters quit, and we had a huge order of oak tables.",
                    "E: Did you finish it?",
                    "S: Two days early, after a lot of overtime.",
                    "E: Your boss must be pleased.",
                    "S#raise: She gave the whole team a bonus and told me I could hire two apprentices.",
                    "E: Brilliant.",
                    "E#vet: Smokey had his check-up at the vet, by the way. He's healthy but needs to lose a bit of weight.",
                    "S: Too many treats?",
                    "E: Guilty.",
                ],
            ),
            (
                "10 December 2023",
                [
                    "S: Are we doing Christmas at Grandma's again?",
                    "E#christmas: Yes, and she asked me to bring my apple strudel.",
                    "S: The famous strudel. I'll bring the wine.",
                    "E: How are the apprentices doing?",
                    "S#apprentices: Both are great. One of them, Nadia, carved a chess set in her spare time.",
                    "E: Talent!",
                    "E#course: I signed up for a course to become a veterinary nurse. It starts in February.",
                    "S: Wait, really? That's a big change.",
                    "E: The shelter made me realise I want to work with animals for real.",
                    "S: I think it suits you perfectly.",
                    "E#smokey: And Smokey lost half a kilo, the vet was proud of us.",
                    "S: Less strudel for Smokey, then.",
                ],
            ),
        ],
    ),
    "ahmed-lucy": (
        {"A": "Ahmed", "L": "Lucy"},
        [
            (
                "12 August 2023",
                [
                    "L: Ahmed, I saw your photos from the street festival. They were gorgeous!",
                    "A#camera: Thank you! I bought a second-hand camera in spring and I've been practising every weekend.",
                    "L: What camera is it?",
                    "A#lens: An old Nikon, with a fifty millimetre lens. It forces me to walk closer to people.",
                    "L: The portrait of the drummer was my favourite.",
                    "A: He was so kind, he even posed twice.",
                    "L#novel: I've finally started writing my novel. I'm doing five hundred words every morning.",
                    "A: That's been your dream for years! What's it about?",
                    "L#plot: A lighthouse keeper on a Scottish island who finds letters from the nineteenth century.",
                    "A: I would read that.",
                    "L: You'll be my first reader, then.",
                    "A#garden: By the way, the council approved our community garden on the empty lot.",
                    "L: Finally! When do we start?",
                    "A: The first work day is in two weeks, we need to clear the rubble.",
                ],
            ),
            (
                "27 August 2023",
                [
                    "L: My back still hurts from yesterday. How many bags of rubble did we fill?",
                    "A#rubble: Sixty-three! And twenty neighbours came, more than I hoped.",
                    "L: The kids from the school were the hardest workers.",
                    "A: They want their own bed for strawberries.",
                    "L: We should give them one.",
                    "A#beds: Yes, I'll build eight raised beds next weekend, one for the school.",
                    "L: How's the photography?",
                    "A#exhibit: A café on the high street asked to show my festival portraits in October.",
                    "L: Your first exhibition! I'm so proud.",
                    "A: It's just a café wall.",
                    "L: It's an exhibition, Ahmed. Accept it.",
                    "L#chapters: The novel is at four chapters now. The keeper just found the first letter.",
                    "A: Who wrote it?",
                    "L: You'll have to wait, no spoilers.",
                ],
            ),
            (
                "15 October 2023",
                [
                    "L: The opening at the café was packed last night.",
                    "A#sold: I sold three prints! The drummer came and bought his own portrait.",
                    "L: That's perfect.",
                    "A: I nearly cried when he walked in.",
                    "L#knee: I have some less fun news: I need knee surgery. I tore a ligament playing netball.",
                    "A: Oh no, Lucy. When is the operation?",
                    "L#surgery: On the sixth of November. Then six weeks on crutches.",
                    "A: I'll water your plot at the garden and bring you soup.",
                    "L: You're the best neighbour.",
                    "L#writing: At least I'll have time to write. I'm aiming to finish the first draft.",
                    "A#harvest: The school kids harvested their first strawberries, by the way. Tiny and sour, but they were thrilled.",
                    "L: That's adorable.",
                ],
            ),
            (
                "3 December 2023",
                [
                    "A: How's the knee?",
                    "L#recovery: Healing well. The physiotherapist says I can walk without crutches by Christmas.",
                    "A: That's great news.",
                    "L#draft: And I finished the first draft! Ninety-two thousand words.",
                    "A: Lucy! That's incredible.",
                    "L: It's a mess, but it exists.",
                    "A: Can I read it now?",
                    "L: After one more round of editing.",
                    "A#course: I signed up for a darkroom course, I want to develop my own film.",
                    "L: You'll turn your bathroom into a darkroom, won't you?",
                    "A: Already measuring the window for a blackout blind.",
                    "A#winter: The garden is sleeping for the winter. We planted garlic and covered the beds with straw.",
                    "L: I missed the last work day, sorry.",
                    "A: You had a good excuse.",
                ],
            ),
            (
                "25 February 2024",
                [
                    "L#agent: I sent the novel to five literary agents last week.",
                    "A: That's brave. Any replies?",
                    "L#reply: One asked for the full manuscript yesterday! I can't stop shaking.",
                    "A: Lucy, that's huge!",
                    "L: It might still be a no.",
                    "A: Or a yes.",
                    "A#print: My first darkroom print came out this week: the lighthouse at the harbour, in black and white.",
                    "L: A lighthouse! For my book?",
                    "A: I was thinking it could be the cover.",
                    "L: Don't make me cry before lunch.",
                    "A#seeds: The garden committee ordered seeds for spring: beans, courgettes and sunflowers.",
                    "L: I'll be back on my knees in the dirt by April, the good knee at least.",
                ],
            ),
        ],
    ),
}


@dataclass(frozen=True)
class Turn:
    key: str  # "<conversation>/<session>/<turn>", stable
    label: str | None
    date: str
    speaker: str
    text: str

    @property
    def content(self) -> str:
        """What is saved: one memory per turn, dated by its session."""
        return f"[{self.date}] {self.speaker}: {self.text}"


@dataclass(frozen=True)
class Conversation:
    name: str
    speakers: tuple[str, str]
    turns: tuple[Turn, ...]

    def by_label(self, label: str) -> Turn:
        for turn in self.turns:
            if turn.label == label:
                return turn
        raise KeyError(f"{self.name}: no turn labelled {label!r}")


def _parse(name: str, speakers: dict[str, str], sessions: list[tuple[str, list[str]]]) -> Conversation:
    turns = []
    for s, (date, lines) in enumerate(sessions, 1):
        for t, line in enumerate(lines, 1):
            head, _, text = line.partition(": ")
            initial, _, label = head.partition("#")
            turns.append(Turn(f"{name}/{s}/{t:02d}", label or None, date, speakers[initial], text))
    return Conversation(name, (speakers[next(iter(speakers))], speakers[list(speakers)[1]]), tuple(turns))


CONVERSATIONS: tuple[Conversation, ...] = tuple(_parse(n, sp, se) for n, (sp, se) in _CONVERSATIONS.items())


@dataclass(frozen=True)
class Question:
    conversation: str
    text: str
    evidence: tuple[str, ...]  # turn labels; empty = nothing is relevant
    kind: str  # single, multi, date, wrong, none


def _qs(conversation: str, items: list[tuple[str, str, str]]) -> list[Question]:
    return [Question(conversation, text, tuple(e.split()) if e else (), kind) for kind, text, e in items]


QUESTIONS: tuple[Question, ...] = tuple(
    _qs(
        "maya-jordan",
        [
            ("single", "What race did Maya register for?", "signup"),
            ("single", "How often does Maya train each week?", "plan"),
            ("single", "Which instrument is Jordan learning to play?", "cello"),
            ("single", "Whose instrument was Jordan's cello originally?", "cello2"),
            ("single", "How did Maya hurt her ankle?", "injury"),
            ("single", "What did the physio tell Maya to do?", "physio"),
            ("single", "What does Jordan's new apartment have that the old one lacked?", "move2"),
            ("single", "What was Maya's finishing time?", "race"),
            ("single", "What breed is the dog Maya adopted?", "dog2"),
            ("single", "What piece of music did Jordan learn first?", "piece"),
            ("single", "How much did Jordan harvest from the balcony?", "harvest"),
            ("multi", "What did the dog trainer recommend and did it work?", "trainer pepper"),
            ("multi", "How did Jordan's recital performance go and what was he invited to?", "recital recital2"),
            ("multi", "What happened during Maya's half marathon training and the race itself?", "injury race race2"),
            ("date", "When did Maya run the half marathon?", "race"),
            ("date", "When did Maya and her partner adopt a dog?", "dog"),
            ("date", "What was Jordan doing in late May 2023?", "move"),
            ("wrong", "What breed is the dog Jordan adopted?", "dog2"),
            ("wrong", "How did Jordan sprain his ankle?", "injury"),
            ("wrong", "Which marathon is Jordan considering for next year?", "nextrace"),
            ("none", "What is Maya's favourite football team?", ""),
            ("none", "Has Jordan ever been skiing in the Alps?", ""),
        ],
    )
    + _qs(
        "priya-tom",
        [
            ("single", "What is Priya planning to sell at the market?", "bakery"),
            ("single", "What certificate did Priya apply for?", "licence"),
            ("single", "What did Tom build to protect his seedlings from frost?", "greenhouse"),
            ("single", "Which cities is Tom's family visiting in Japan?", "japan2"),
            ("single", "How quickly did Priya sell out on the first market day?", "soldout"),
            ("single", "What did Tom lose on the train?", "lost"),
            ("single", "Who is Priya's new business partner?", "partner"),
            ("single", "What award did Lily receive at school?", "school"),
            ("single", "What did Priya and Anita plan to open?", "cafe"),
            ("single", "How old did Tom's daughter turn?", "daughter"),
            ("multi", "How did Priya's baking capacity grow over the year?", "oven oven2"),
            ("multi", "What happened with Tom's wallet in Japan?", "lost lost2"),
            ("multi", "How did Tom deal with the slugs in his garden?", "beer slugs"),
            ("date", "When did Priya pass the kitchen inspection?", "inspection"),
            ("date", "When did Tom's family go to Japan for the cherry blossom?", "japan trip"),
            ("date", "What did Lily achieve in June 2024?", "school"),
            ("wrong", "What did Priya lose on the train in Japan?", "lost"),
            ("wrong", "How many loaves did Tom sell at the first market?", "soldout"),
            ("wrong", "What did Priya build out of old windows?", "greenhouse"),
            ("none", "What car does Tom drive?", ""),
            ("none", "Did Priya ever study medicine?", ""),
        ],
    )
    + _qs(
        "elena-sam",
        [
            ("single", "What did Sam make for his grandmother's ninetieth birthday?", "gift"),
            ("single", "What kind of wood did Sam use for the gift?", "walnut"),
            ("single", "Where does Elena volunteer on weekends?", "shelter"),
            ("single", "Which animals does Elena look after at the shelter?", "cats"),
            ("single", "What job did Sam interview for?", "position"),
            ("single", "How much money did the shelter's fundraiser raise?", "raised"),
            ("single", "What did the vet say about Smokey's health?", "vet"),
            ("single", "What is Elena bringing to Christmas lunch?", "christmas"),
            ("single", "What did the apprentice Nadia carve?", "apprentices"),
            ("single", "What career is Elena training for?", "course"),
            ("multi", "How did Smokey settle in after his adoption?", "adopt hide"),
            ("multi", "How did Grandma react to the birthday present?", "box lunch"),
            ("multi", "What changed for Sam's team after the big oak order?", "team raise"),
            ("date", "When does Sam start his new job?", "job"),
            ("date", "When did Elena take Smokey home?", "adopt"),
            ("date", "What did the shelter organise for September 2023?", "fundraiser"),
            ("wrong", "What did Elena carve for her grandmother?", "gift"),
            ("wrong", "Which cat did Sam adopt from the shelter?", "adopt"),
            ("wrong", "What position was Elena interviewing for at the furniture company?", "position"),
            ("none", "What is Sam's favourite band?", ""),
            ("none", "Where did Elena go on her summer holiday?", ""),
        ],
    )
    + _qs(
        "ahmed-lucy",
        [
            ("single", "What kind of camera did Ahmed buy?", "lens"),
            ("single", "How much does Lucy write every day?", "novel"),
            ("single", "What is Lucy's novel about?", "plot"),
            ("single", "What did the council approve?", "garden"),
            ("single", "How many bags of rubble were filled on the work day?", "rubble"),
            ("single", "Where were Ahmed's portraits exhibited?", "exhibit"),
            ("single", "How did Lucy injure her knee?", "knee"),
            ("single", "How long is the first draft of Lucy's novel?", "draft"),
            ("single", "What course is Ahmed taking?", "course"),
            ("single", "What seeds did the garden committee order?", "seeds"),
            ("multi", "How is Lucy's knee recovery going after the operation?", "surgery recovery"),
            ("multi", "What has happened with Lucy's novel and literary agents?", "agent reply"),
            ("multi", "What did the school children grow in the community garden?", "beds harvest"),
            ("date", "When is Lucy's knee operation?", "surgery"),
            ("date", "When did Ahmed's photography exhibition open?", "sold"),
            ("date", "What did Ahmed print in his darkroom in February 2024?", "print"),
            ("wrong", "How did Ahmed tear his knee ligament?", "knee"),
            ("wrong", "What is Ahmed's novel about?", "plot"),
            ("wrong", "How many prints did Lucy sell at the café?", "sold"),
            ("none", "Does Lucy speak Spanish?", ""),
            ("none", "What did Ahmed cook for Eid?", ""),
        ],
    )
)


def conversation(name: str) -> Conversation:
    for conv in CONVERSATIONS:
        if conv.name == name:
            return conv
    raise KeyError(name)


@dataclass
class ConversationScores:
    """recall@5/@10 (share of a question's evidence turns found) and MRR@10 over answerable questions."""

    recall_at_5: float
    recall_at_10: float
    mrr_at_10: float
    none_results: int
    none_queries: int
    answerable: int
    by_kind: dict[str, float] = field(default_factory=dict)  # recall@10 per kind
    missed: list[str] = field(default_factory=list)

    @property
    def none_per_query(self) -> float:
        return self.none_results / max(1, self.none_queries)

    def line(self, name: str) -> str:
        kinds = " ".join(f"{k} {v:.2f}" for k, v in sorted(self.by_kind.items()))
        return (
            f"{name:<22} recall@5 {self.recall_at_5:.3f}  recall@10 {self.recall_at_10:.3f}  MRR@10 {self.mrr_at_10:.3f}  "
            f"nothing-relevant {self.none_per_query:.2f}/query  (recall@10 by kind: {kinds})"
        )


def evaluate(results: dict[tuple[str, str], list[str]], ids: dict[str, dict[str, str]]) -> ConversationScores:
    """Score `results` ((conversation, question) → ranked record ids, ≥ 10 deep) against the labels.

    `ids` maps conversation → turn key → record id. Nothing-relevant questions count what their
    top 5 returned (the bilingual evaluation's measure).
    """
    r5 = r10 = rr = 0.0
    none_results = none_queries = answerable = 0
    per_kind: dict[str, list[float]] = {}
    missed = []
    for q in QUESTIONS:
        got = results[(q.conversation, q.text)]
        if not q.evidence:
            none_queries += 1
            none_results += len(got[:5])
            continue
        answerable += 1
        conv = conversation(q.conversation)
        want = {ids[q.conversation][conv.by_label(label).key] for label in q.evidence}
        found5 = len(want & set(got[:5])) / len(want)
        found10 = len(want & set(got[:10])) / len(want)
        r5 += found5
        r10 += found10
        per_kind.setdefault(q.kind, []).append(found10)
        first = next((i for i, rid in enumerate(got[:10]) if rid in want), None)
        rr += 0.0 if first is None else 1.0 / (first + 1)
        if found10 < 1.0:
            missed.append(f"{q.kind}:{q.text}")
    return ConversationScores(
        r5 / answerable,
        r10 / answerable,
        rr / answerable,
        none_results,
        none_queries,
        answerable,
        {k: sum(v) / len(v) for k, v in per_kind.items()},
        missed,
    )


# -- a plain BM25 baseline (Okapi, k1 1.5, b 0.75, lowercase words; rank-bm25's defaults) --------

_WORD = re.compile(r"\w+")


def bm25_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def bm25_ranking(documents: Sequence[str], k1: float = 1.5, b: float = 0.75) -> Callable[[str], list[int]]:
    """A ranking function over `documents`: query → document indices with a positive score, best first.

    Written out here (not the server's scoring) as the baseline: Okapi BM25 with IDF
    ``ln((N − df + 0.5)/(df + 0.5) + 1)``, over lowercase ``\\w+`` words, no stemming, no stop words.
    """
    docs = [Counter(bm25_words(d)) for d in documents]
    lengths = [sum(d.values()) for d in docs]
    avgdl = sum(lengths) / max(1, len(docs))
    df: Counter[str] = Counter()
    for d in docs:
        df.update(d.keys())
    n = len(docs)

    def search(query: str) -> list[int]:
        scores = [0.0] * n
        for word in set(bm25_words(query)):
            if word not in df:
                continue
            w = math.log((n - df[word] + 0.5) / (df[word] + 0.5) + 1.0)
            for i, d in enumerate(docs):
                tf = d.get(word)
                if tf:
                    scores[i] += w * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[i] / avgdl))
        ranked = sorted((i for i in range(n) if scores[i] > 0), key=lambda i: (-scores[i], i))
        return ranked

    return search


# -- running it --------------------------------------------------------------------------------

#: Results asked for per question (recall@10 needs ten).
TOP_K = 10


def fill(store: SharedStore, conv: Conversation) -> dict[str, str]:
    """Save every turn of `conv` as one memory in global, in order; turn key → record id."""
    return {turn.key: store.save("global", turn.content).record.id for turn in conv.turns}


def search_all(
    store: SharedStore,
    conv: Conversation,
    channel: VectorChannel | None,
    *,
    budget: float = EVAL_BUDGET,
    dense: bool = False,
) -> dict[tuple[str, str], list[str]]:
    """Every question of `conv` through the server's ranking (lexical alone when `channel` is None).

    With `dense`, the vector channel alone (the ranking over an empty query).
    """
    from dsh_memory_mcp.search import scoring
    from dsh_memory_mcp.store.records import now_ms

    snaps = [store.snapshot("global")]
    out = {}
    for q in QUESTIONS:
        if q.conversation != conv.name:
            continue
        scores = channel.query_scores(q.text, snaps, budget=budget) if channel is not None else None
        hits = scoring.rank(snaps, "" if dense else q.text, top_k=TOP_K, now=now_ms(), vector_scores=scores)
        out[(q.conversation, q.text)] = [h.record.id for h in hits]
    return out


def bm25_all(conv: Conversation, ids: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """Every question of `conv` through the plain BM25 baseline over the same memories."""
    search = bm25_ranking([t.content for t in conv.turns])
    keys = [t.key for t in conv.turns]
    return {
        (q.conversation, q.text): [ids[keys[i]] for i in search(q.text)[:TOP_K]]
        for q in QUESTIONS
        if q.conversation == conv.name
    }


def run_all(
    make_store: Callable[[str], SharedStore],
    settings: VectorSettings | None,
    *,
    repeat: bool = False,
) -> dict[str, ConversationScores]:
    """Lexical (and hybrid and dense alone when `settings`) and BM25 over every conversation, one store each.

    With `repeat`, every question is asked a second time after the first round's hits were
    counted as accesses (written back, as the server does), and that round is scored too
    (``"… again"``): recall must not drift with the access counts.
    """
    from dsh_memory_mcp.search.calibration import CALIBRATION_FILE
    from dsh_memory_mcp.search.vectors import VectorChannel

    names = ["lexical", "bm25"] + (["hybrid", "dense"] if settings is not None else [])
    if repeat:
        names += [f"{n} again" for n in names if n not in ("bm25", "dense")]
    results: dict[str, dict[tuple[str, str], list[str]]] = {n: {} for n in names}
    all_ids: dict[str, dict[str, str]] = {}
    calibrated: bytes | None = None
    for conv in CONVERSATIONS:
        store = make_store(conv.name)
        try:
            ids = all_ids[conv.name] = fill(store, conv)
            results["bm25"].update(bm25_all(conv, ids))
            channel = None
            cal_path = Path(store.root) / CALIBRATION_FILE
            if settings is not None and calibrated is not None:
                # The model's calibration depends on the model alone (its fixed probes): the first
                # store's cached one serves the others, as it would a store that had seen the model.
                cal_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                cal_path.write_bytes(calibrated)
                cal_path.chmod(0o600)
            if settings is not None:
                channel = VectorChannel(settings, store, load_timeout=60)
                store.on_delete = channel.on_delete
                channel.start()
                if not channel.wait_ready(60) or not channel.wait_idle(300):
                    raise RuntimeError(channel.status)
                calibrated = calibrated or cal_path.read_bytes()
            try:
                rounds = [("lexical", None)] + ([("hybrid", channel)] if channel is not None else [])
                if channel is not None:  # before any access is counted
                    results["dense"].update(search_all(store, conv, channel, dense=True))
                for name, ch in rounds:
                    got = search_all(store, conv, ch)
                    results[name].update(got)
                    if repeat:
                        _touch(store, got)
                for name, ch in rounds if repeat else []:
                    results[f"{name} again"].update(search_all(store, conv, ch))
            finally:
                if channel is not None:
                    channel.close()
        finally:
            store.close()
    return {name: evaluate(got, all_ids) for name, got in results.items()}


def _touch(store: SharedStore, results: dict[tuple[str, str], list[str]]) -> None:
    """Count every returned memory as recalled, as `memory_search` does, and write the counts back."""
    for got in results.values():
        if got:
            store.touch({"global": got})
    store.flush()
