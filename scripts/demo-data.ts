/**
 * The demo community that `corkboard seed --demo` creates: a small neighbourhood board. Every entry is written
 * through the API, so each one must be allowed to its author: a reply or a recommend on a `followers` post comes
 * from a follower of its owner (the seed stops with the API's answer otherwise).
 */

export const DEMO_PASSWORD = 'corkboard-demo';

export interface DemoUser {
  username: string;
  displayName: string;
  bio: string;
}

export const DEMO_USERS: DemoUser[] = [
  { username: 'maren_h', displayName: 'Maren Holt', bio: 'Runs the Thursday repair café. Will fix your toaster and gently judge your soldering.' },
  { username: 'tomas_r', displayName: 'Tomás Rivera', bio: 'Urban beekeeper: three hives on a garage roof and a lot of patience.' },
  { username: 'priya_k', displayName: 'Priya Kapoor', bio: 'Librarian. Looks after the seed library and the zine shelf.' },
  { username: 'jonas_w', displayName: 'Jonas Weber', bio: 'Bikes, mostly. Cargo bike evangelist and Sunday ride organiser.' },
  { username: 'ade_o', displayName: 'Adaeze Okafor', bio: 'Allotment plot 14. Tomatoes, squash, and strong opinions about compost.' },
  { username: 'lin_c', displayName: 'Lin Chen', bio: 'Sourdough, film photography, slow weekends.' },
  { username: 'sam_b', displayName: 'Sam Brennan', bio: 'New in town. Looking for a climbing partner and a decent bakery.' },
  { username: 'elif_y', displayName: 'Elif Yılmaz', bio: 'Choir alto and amateur astronomer. Ask me about the next clear night.' },
];

/** [follower, followed] */
export const DEMO_FOLLOWS: [string, string][] = [
  ['maren_h', 'tomas_r'],
  ['maren_h', 'priya_k'],
  ['maren_h', 'ade_o'],
  ['tomas_r', 'maren_h'],
  ['tomas_r', 'ade_o'],
  ['tomas_r', 'lin_c'],
  ['priya_k', 'maren_h'],
  ['priya_k', 'elif_y'],
  ['priya_k', 'jonas_w'],
  ['jonas_w', 'maren_h'],
  ['jonas_w', 'sam_b'],
  ['jonas_w', 'lin_c'],
  ['ade_o', 'tomas_r'],
  ['ade_o', 'maren_h'],
  ['ade_o', 'priya_k'],
  ['lin_c', 'tomas_r'],
  ['lin_c', 'elif_y'],
  ['lin_c', 'jonas_w'],
  ['sam_b', 'jonas_w'],
  ['sam_b', 'maren_h'],
  ['sam_b', 'lin_c'],
  ['sam_b', 'elif_y'],
  ['elif_y', 'priya_k'],
  ['elif_y', 'lin_c'],
];

/**
 * The seed's very last write. Its presence says that an earlier run finished; demo users without it are what is
 * left of an interrupted run.
 */
export const DEMO_COMPLETION_FOLLOW: [string, string] = ['elif_y', 'sam_b'];

export type Visibility = 'public' | 'followers' | 'private';

export interface DemoPost {
  key: string;
  owner: string;
  visibility: Visibility;
  title: string;
  content: string;
}

export const DEMO_POSTS: DemoPost[] = [
  {
    key: 'repair-cafe',
    owner: 'maren_h',
    visibility: 'public',
    title: 'Repair café this Thursday: bring your broken things',
    content:
      'Community hall, 6 to 9 pm. We will have two soldering stations, a sewing machine and a box of spare fuses. ' +
      'Bring the lamp that flickers, the jacket with the stuck zip, the radio that hums. Tea is free, cake is by donation.',
  },
  {
    key: 'workbench',
    owner: 'maren_h',
    visibility: 'followers',
    title: 'Need a hand moving the workbench on Saturday',
    content: 'The big oak bench is going from my garage to the hall. It takes four people and one sensible plan. 10 am, pizza after.',
  },
  {
    key: 'parts-list',
    owner: 'maren_h',
    visibility: 'private',
    title: 'Parts to order',
    content: 'Thermal fuses (240 °C) for kettles, 5 m of 0.75 mm² flex, a new tip for the big iron, heat-shrink assortment.',
  },
  {
    key: 'first-honey',
    owner: 'tomas_r',
    visibility: 'public',
    title: 'First honey of the season',
    content: 'Twelve jars from the lime trees along the canal, light and a little minty. Swaps welcome, especially for vegetables.',
  },
  {
    key: 'hive-notes',
    owner: 'tomas_r',
    visibility: 'followers',
    title: 'Hive inspection notes, week 3',
    content: 'Hive two is building queen cells along the bottom bars. I will split it this weekend before it swarms over the school.',
  },
  {
    key: 'seed-library',
    owner: 'priya_k',
    visibility: 'public',
    title: 'The seed library is open again',
    content:
      'The drawers by the library entrance are restocked: beans, chard, three kinds of tomato, marigolds. Take what you ' +
      'will grow, and if you can, bring back seeds from your best plants in autumn.',
  },
  {
    key: 'zine-swap',
    owner: 'priya_k',
    visibility: 'public',
    title: 'Zine swap: call for submissions',
    content: 'Any topic, any size, photocopied is perfect. Drop two copies at the front desk by the end of the month.',
  },
  {
    key: 'grant-draft',
    owner: 'priya_k',
    visibility: 'private',
    title: 'Draft: grant application for the reading corner',
    content: 'Budget: two armchairs, a rug, shelving for picture books. Ask Maren about a quote for mounting the shelves.',
  },
  {
    key: 'test-rides',
    owner: 'jonas_w',
    visibility: 'public',
    title: 'Cargo bike test rides on Sunday',
    content: 'Three bikes to try in the school car park from 11: a long-tail, a box bike and an electric trike. Kids can ride along.',
  },
  {
    key: 'tyre-order',
    owner: 'jonas_w',
    visibility: 'followers',
    title: 'Anyone want to split a tyre order?',
    content: 'Ordering puncture-resistant tyres in bulk on Friday; it gets cheaper from ten. Tell me your sizes.',
  },
  {
    key: 'squash',
    owner: 'ade_o',
    visibility: 'public',
    title: 'Plot 14 update: the squash has won',
    content: 'It has climbed the fence, swallowed the path and started on the shed. I regret nothing. Recipes gratefully received.',
  },
  {
    key: 'seedlings',
    owner: 'ade_o',
    visibility: 'followers',
    title: 'Spare seedlings, first come first served',
    content: 'Courgettes, kale and a tray of leeks on the bench by plot 14. Take them before the slugs do.',
  },
  {
    key: 'loaf',
    owner: 'lin_c',
    visibility: 'public',
    title: 'A loaf a day: week 12',
    content: 'Rye and caraway this week. The starter is now older than my houseplants and considerably better looked after.',
  },
  {
    key: 'darkroom',
    owner: 'lin_c',
    visibility: 'followers',
    title: 'Darkroom night at mine?',
    content: 'The bathroom is blacked out and the chemicals are fresh. Bring negatives; I have paper for about forty prints.',
  },
  {
    key: 'hello',
    owner: 'sam_b',
    visibility: 'public',
    title: 'Hello from the new person on Elm Street',
    content: 'Moved in last week. I climb, I cook badly, and I would love to know where people here get their bread.',
  },
  {
    key: 'perseids',
    owner: 'elif_y',
    visibility: 'public',
    title: 'Clear skies forecast: Perseids watch on the hill',
    content: 'Thursday night from 11 pm on the hill behind the reservoir. Bring a blanket and something warm to drink; no torches, please.',
  },
  {
    key: 'alto-part',
    owner: 'elif_y',
    visibility: 'private',
    title: 'Choir: alto part, bars 32 to 48',
    content: 'Breathe after "morning", not before. The B flat in bar 41 comes in under the sopranos: listen, do not push.',
  },
];

/** [post key, author, content] */
export const DEMO_REPLIES: [string, string, string][] = [
  ['repair-cafe', 'tomas_r', 'I will bring the radio that has been humming since 2019.'],
  ['repair-cafe', 'sam_b', 'Is this a good place to learn? I have never soldered anything.'],
  ['repair-cafe', 'maren_h', 'Absolutely. Come early and we will start you on a kit.'],
  ['first-honey', 'ade_o', 'Trade you a jar for a box of tomatoes?'],
  ['first-honey', 'lin_c', 'Would love some for the next loaf. Honey and oat?'],
  ['hive-notes', 'maren_h', 'Good luck with the split. Shout if you need a second pair of hands.'],
  ['seed-library', 'ade_o', 'I will drop off the bean seeds I saved last year.'],
  ['test-rides', 'sam_b', 'Count me in. Do I need to bring anything?'],
  ['test-rides', 'jonas_w', 'Just yourself, and a helmet if you have one.'],
  ['tyre-order', 'priya_k', 'Two 20-inch ones for me, please.'],
  ['seedlings', 'tomas_r', 'Save me two courgettes!'],
  ['darkroom', 'elif_y', 'Yes! I will bring the expired film I have been hoarding.'],
  ['darkroom', 'jonas_w', 'I am in if it is after eight.'],
  ['hello', 'maren_h', 'Welcome! The repair café is on Thursdays, come and say hi.'],
  ['hello', 'jonas_w', 'Welcome to the neighbourhood. There is a group ride every Sunday.'],
  ['hello', 'lin_c', 'Bread: the bakery by the station, or my kitchen on Saturdays.'],
  ['perseids', 'priya_k', 'The library has two telescopes you can borrow for the night.'],
  ['perseids', 'sam_b', 'What time does it get good? I would like to come.'],
  ['perseids', 'elif_y', 'After midnight, once the moon has set.'],
];

/** [post key, user who recommends it] */
export const DEMO_RECOMMENDS: [string, string][] = [
  ['repair-cafe', 'tomas_r'],
  ['repair-cafe', 'priya_k'],
  ['repair-cafe', 'sam_b'],
  ['repair-cafe', 'ade_o'],
  ['first-honey', 'maren_h'],
  ['first-honey', 'ade_o'],
  ['first-honey', 'lin_c'],
  ['seed-library', 'maren_h'],
  ['seed-library', 'elif_y'],
  ['seed-library', 'jonas_w'],
  ['test-rides', 'sam_b'],
  ['test-rides', 'lin_c'],
  ['squash', 'tomas_r'],
  ['squash', 'maren_h'],
  ['loaf', 'tomas_r'],
  ['loaf', 'elif_y'],
  ['loaf', 'jonas_w'],
  ['darkroom', 'elif_y'],
  ['hello', 'maren_h'],
  ['hello', 'jonas_w'],
  ['hello', 'elif_y'],
  ['perseids', 'priya_k'],
  ['perseids', 'lin_c'],
  ['perseids', 'sam_b'],
];

/** [author, title, content] */
export const DEMO_BOARDS: [string, string, string][] = [
  [
    'maren_h',
    'Community hall: new booking times',
    'From next month the hall can be booked in two-hour slots, weekdays 9 am to 10 pm. The calendar is pinned inside the front door.',
  ],
  ['priya_k', 'Found: blue umbrella at the library', 'Left by the magazine rack on Tuesday. It is at the front desk, waiting for you.'],
  ['jonas_w', 'For sale: child seat for a cargo bike', 'Fits most box bikes, two harnesses and a rain cover. 60, or swap for something useful.'],
  ['ade_o', 'Allotment waiting list', 'Two plots will be free in spring. Put your name on the list in the shed by the gate before the end of February.'],
];
